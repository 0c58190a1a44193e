/// A ``FutureResult`` that its creator fills with a value or an error.
///
/// ```swift
/// func loadSwiftOrgHTML() -> FutureResult<String> {
///     let deferred = DeferredResult<String>()
///     loader.load(url) { data, error in
///         if let error { deferred.failure(error: error) } else { deferred.success(value: html(data)) }
///     }
///     return deferred
/// }
/// ```
// `@unchecked` because `FutureResult` is `@unchecked`; `DeferredResult` adds no stored state.
public final class DeferredResult<Value: Sendable>: FutureResult<Value>, @unchecked Sendable {

    /// Creates an unfilled future.
    @inlinable
    override public init() {
        super.init()
    }

    /// Fills the future with a successful `value`.
    ///
    /// A future is filled once: a call after the first fill changes nothing.
    ///
    /// - Parameter value: The value of the future.
    /// - Returns: `true` when this call filled the future, `false` when it was already filled.
    @inlinable @discardableResult
    public func success(value: Value) -> Bool {
        complete(.success(value))
    }

    /// Fills the future with the failure `error`.
    ///
    /// A future is filled once: a call after the first fill changes nothing.
    ///
    /// - Parameter error: Why the value could not be produced.
    /// - Returns: `true` when this call filled the future, `false` when it was already filled.
    @inlinable @discardableResult
    public func failure(error: any Error) -> Bool {
        complete(.failure(error))
    }

    /// Fills the future with `result`.
    ///
    /// A future is filled once: a call after the first fill changes nothing.
    ///
    /// - Parameter result: The value or the error of the future.
    /// - Returns: `true` when this call filled the future, `false` when it was already filled.
    @inlinable @discardableResult
    public func fill(result: Result<Value, any Error>) -> Bool {
        complete(result)
    }
}
