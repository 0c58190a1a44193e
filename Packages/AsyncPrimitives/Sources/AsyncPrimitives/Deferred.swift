/// A ``Future`` that its creator fills.
///
/// An asynchronous function creates a `Deferred`, returns it as a `Future`, and calls
/// ``fill(value:)`` when the value is ready.
// `@unchecked` because `Future` is `@unchecked`; `Deferred` adds no stored state.
public final class Deferred<Value: Sendable>: Future<Value>, @unchecked Sendable {

    /// Creates an unfilled future.
    @inlinable
    override public init() {
        super.init()
    }

    /// Fills the future with `value` and schedules every handler attached so far.
    ///
    /// A future is filled once: a second call changes nothing.
    ///
    /// - Parameter value: The value of the future.
    /// - Returns: `true` when this call filled the future, `false` when it was already filled.
    @inlinable @discardableResult
    public func fill(value: Value) -> Bool {
        complete(value)
    }
}
