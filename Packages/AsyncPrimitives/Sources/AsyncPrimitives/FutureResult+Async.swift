import Synchronization

extension FutureResult {
    /// The successful value, once the future is filled.
    ///
    /// - Throws: The future's error when it failed; `CancellationError` when the awaiting task
    ///   is cancelled before the fill (the future itself is unaffected).
    public var value: Value {
        get async throws {
            let waiter = Waiter<Value>()
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    if waiter.store(continuation) {
                        observe(Callback(queue: nil) { waiter.resume(with: $0) })
                    }
                }
            } onCancel: {
                waiter.resume(with: .failure(CancellationError()))
            }
        }
    }
}

/// One awaiting task: resumed exactly once, by the fill or by cancellation, whichever is first.
final class Waiter<Value: Sendable>: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Value, any Error>)
        case finished(Result<Value, any Error>?)
    }

    private let state = Mutex(State.idle)

    /// Stores the continuation.
    ///
    /// - Returns: `false` when the waiter was already resumed (cancelled before it waited);
    ///   the continuation has been resumed then.
    func store(_ continuation: CheckedContinuation<Value, any Error>) -> Bool {
        let early = state.withLock { state -> Result<Value, any Error>?? in
            switch state {
            case .idle:
                state = .waiting(continuation)
                return .none
            case .waiting:
                return .none
            case .finished(let result):
                state = .finished(nil)
                return .some(result)
            }
        }
        guard let early else { return true }
        if let early { continuation.resume(with: early) }
        return false
    }

    /// Resumes the waiting task with `result` unless it was resumed already.
    func resume(with result: Result<Value, any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<Value, any Error>? in
            switch state {
            case .idle:
                state = .finished(result)
                return nil
            case .waiting(let continuation):
                state = .finished(nil)
                return continuation
            case .finished:
                return nil
            }
        }
        continuation?.resume(with: result)
    }
}
