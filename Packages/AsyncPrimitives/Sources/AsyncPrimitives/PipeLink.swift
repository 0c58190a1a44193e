/// The future a value-returning `pipe` returns, holding the function it applies.
///
/// The handler attached to the previous future captures only this object, so a link costs
/// one allocation: no closure context holding the function and the next future. The function
/// is dropped once it has run (or been skipped), as a filled future drops its handlers, so a
/// function that captures the future `pipe` returned does not keep it alive.
// `@unchecked` because `FutureResult` is `@unchecked` (not final) and `function` is a `var`.
// Safe: `function` is written by `init` and then only by `receive`, which runs once (it is the
// one handler this link attaches to the previous future, and a future runs each handler
// once); the only other access is the destruction in `deinit`, which follows `receive`'s end
// through the reference count (the handler holds this object while `receive` runs).
@usableFromInline final class PipeLink<In: Sendable, Out: Sendable>: FutureResult<Out>, @unchecked Sendable {
    // No dynamic exclusivity check (it was ~5% of a chain link's instructions): see above,
    // `receive` is the only access after `init`, and it runs once.
    @exclusivity(unchecked) @usableFromInline var function: (@Sendable (In) throws -> Out)?

    @inlinable
    init(_ function: @escaping @Sendable (In) throws -> Out) {
        self.function = function
        super.init()
    }

    /// Fills this future with what `function` makes of a success, or with the failure.
    @inlinable
    func receive(_ result: Result<In, any Error>) {
        let function = self.function.take()
        switch result {
        case .success(let value):
            guard let function else { return }
            _ = complete(Result { try function(value) })
        case .failure(let error):
            _ = complete(.failure(error))
        }
    }
}
