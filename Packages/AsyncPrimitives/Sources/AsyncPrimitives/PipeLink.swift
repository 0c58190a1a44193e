/// The future a value-returning `pipe` returns, holding the function it applies.
///
/// The handler attached to the previous future captures only this object, so a link costs
/// one allocation: no closure context holding the function and the next future.
// `@unchecked` because `FutureResult` is `@unchecked` (not final). Safe: the one stored
// property added is an immutable `@Sendable` closure; the rest is `FutureResult`'s `Mutex`.
@usableFromInline
final class PipeLink<In: Sendable, Out: Sendable>: FutureResult<Out>, @unchecked Sendable {
    @usableFromInline let function: @Sendable (In) throws -> Out

    @inlinable
    init(_ function: @escaping @Sendable (In) throws -> Out) {
        self.function = function
        super.init()
    }

    /// Fills this future with what `function` makes of a success, or with the failure.
    @inlinable
    func receive(_ result: Result<In, any Error>) {
        switch result {
        case .success(let value):
            _ = complete(Result { try function(value) })
        case .failure(let error):
            _ = complete(.failure(error))
        }
    }
}
