/// The handlers of a ``FutureResult`` and, once filled, its result: ``CallbackState`` for a
/// `Result`, with the success and the error stored apart.
///
/// The success is kept in a ``ValueSlot``, so no stored property's layout depends on `Value`:
/// destroying a `FutureResult` looks up no generic metadata at run time (a `Value?` here cost
/// two lookups, `ResultState<Value>` and `Optional<Value>`, a quarter of a chain link's
/// instructions). The owner's `deinit` destroys the value.
@usableFromInline
struct ResultState<Value: Sendable>: ~Copyable, Sendable {
    @usableFromInline var success: ValueSlot<Value>
    @usableFromInline var failure: (any Error)?
    @usableFromInline var first: Callback<Result<Value, any Error>>?
    @usableFromInline var rest: [Callback<Result<Value, any Error>>]

    @inlinable
    init(value: Result<Value, any Error>? = nil) {
        success = ValueSlot()
        failure = nil
        first = nil
        rest = []
        switch value {
        case .success(let value)?: success.set(value)
        case .failure(let error)?: failure = error
        case nil: break
        }
    }

    /// The result, once filled.
    @inlinable
    var value: Result<Value, any Error>? {
        mutating get {
            if let success = success.value { return .success(success) }
            if let failure { return .failure(failure) }
            return nil
        }
    }

    /// Whether the future is filled.
    @inlinable
    var isFilled: Bool {
        success.isSet || failure != nil
    }

    /// Moves `callback` into the state unless the future is filled.
    ///
    /// - Returns: The result when the future is already filled; `callback` is left in place
    ///   then, for the caller to run.
    @inlinable
    mutating func add(_ callback: inout Callback<Result<Value, any Error>>?) -> Result<Value, any Error>? {
        if let value { return value }
        if first == nil {
            first = callback.take()
        } else if let callback = callback.take() {
            rest.append(callback)
        }
        return nil
    }

    /// Fills the future unless it is filled already, as ``CallbackState/fill(_:drain:)`` does.
    @inlinable
    mutating func fill(
        _ newValue: Result<Value, any Error>,
        drain: DrainContext?
    ) -> FillOutcome<Result<Value, any Error>> {
        if isFilled { return .alreadyFilled }
        switch newValue {
        case .success(let value): success.set(value)
        case .failure(let error): failure = error
        }
        if rest.isEmpty, let queue = first?.queue {
            if let drain, drain.accepts(queue) { return .appendToDrain }
            return .dispatchPending(queue)
        }
        let callbacks = Callbacks(first: first, rest: rest)
        first = nil
        rest = []
        return .run(callbacks)
    }

    /// The pending handler and the result, once; the future drops the handler.
    @inlinable
    mutating func takePending() -> (Callback<Result<Value, any Error>>, Result<Value, any Error>)? {
        guard let value, let callback = first.take() else { return nil }
        return (callback, value)
    }

}
