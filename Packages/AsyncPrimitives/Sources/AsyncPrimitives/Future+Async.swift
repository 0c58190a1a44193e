import Synchronization

extension Future {
    /// The value, once the future is filled.
    ///
    /// Waits for the fill even when the awaiting task is cancelled: a non-throwing property
    /// cannot report cancellation. Wrap the future in a ``FutureResult`` (or use a
    /// ``DeferredResult``) to get a `value` that throws `CancellationError` instead.
    public var value: Value {
        get async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value, Never>) in
                observe(Callback(queue: nil) { continuation.resume(returning: $0) })
            }
        }
    }
}
