public import Dispatch

// The seed's five chainable shapes, plus `(Value) throws -> FutureResult<Out>` so that a
// throwing function returning a `FutureResult` is flattened instead of nested. When a
// function fits several shapes, Swift picks the most specific one: a non-throwing function
// returning `FutureResult<T>` uses the first overload, not `(Value) -> Out` with
// `Out == FutureResult<T>`.

extension FutureResult {
    /// Chains a function that returns a `FutureResult`.
    ///
    /// Runs `function` with the value when this future succeeds; otherwise skips it and passes
    /// the error on.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives the successful value and returns the next future result.
    /// - Returns: A future with the result of the future that `function` returns, or this
    ///   future's error.
    @inlinable
    public func pipe<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        into function: @escaping @Sendable (Value) -> FutureResult<Out>
    ) -> FutureResult<Out> {
        let next = FutureResult<Out>()
        observe(Callback(queue: queue) { result in
            switch result {
            case .success(let value):
                function(value).observe(Callback(queue: nil) { _ = next.complete($0) })
            case .failure(let error):
                _ = next.complete(.failure(error))
            }
        })
        return next
    }

    /// Chains a throwing function that returns a `FutureResult`.
    ///
    /// Runs `function` with the value when this future succeeds; otherwise skips it and passes
    /// the error on. An error `function` throws becomes the result.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives the successful value and returns the next future result.
    /// - Returns: A future with the result of the future that `function` returns, the error
    ///   it threw, or this future's error.
    @inlinable
    public func pipe<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        into function: @escaping @Sendable (Value) throws -> FutureResult<Out>
    ) -> FutureResult<Out> {
        let next = FutureResult<Out>()
        observe(Callback(queue: queue) { result in
            do {
                try function(result.get()).observe(Callback(queue: nil) { _ = next.complete($0) })
            } catch {
                _ = next.complete(.failure(error))
            }
        })
        return next
    }

    /// Chains a throwing function that returns a `Future`.
    ///
    /// Runs `function` with the value when this future succeeds; otherwise skips it and passes
    /// the error on. An error `function` throws becomes the result.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives the successful value and returns a future of the next value.
    /// - Returns: A future with the value of the future `function` returns, the error it
    ///   threw, or this future's error.
    @inlinable
    public func pipe<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        into function: @escaping @Sendable (Value) throws -> Future<Out>
    ) -> FutureResult<Out> {
        let next = FutureResult<Out>()
        observe(Callback(queue: queue) { result in
            do {
                try function(result.get()).observe(Callback(queue: nil) { _ = next.complete(.success($0)) })
            } catch {
                _ = next.complete(.failure(error))
            }
        })
        return next
    }

    /// Chains a function that returns a `Future`.
    ///
    /// Runs `function` with the value when this future succeeds; otherwise skips it and passes
    /// the error on.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives the successful value and returns a future of the next value.
    /// - Returns: A future with the value of the future `function` returns, or this future's
    ///   error.
    @inlinable
    public func pipe<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        into function: @escaping @Sendable (Value) -> Future<Out>
    ) -> FutureResult<Out> {
        let next = FutureResult<Out>()
        observe(Callback(queue: queue) { result in
            switch result {
            case .success(let value):
                function(value).observe(Callback(queue: nil) { _ = next.complete(.success($0)) })
            case .failure(let error):
                _ = next.complete(.failure(error))
            }
        })
        return next
    }

    /// Chains a throwing function that returns a value.
    ///
    /// Runs `function` with the value when this future succeeds; otherwise skips it and passes
    /// the error on. An error `function` throws becomes the result.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives the successful value and returns the next value.
    /// - Returns: A future with what `function` returns, the error it threw, or this future's
    ///   error.
    @inlinable
    public func pipe<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        into function: @escaping @Sendable (Value) throws -> Out
    ) -> FutureResult<Out> {
        let next = PipeLink<Value, Out>(function)
        observe(Callback(queue: queue) { next.receive($0) })
        return next
    }

    /// Chains a function that returns a value.
    ///
    /// Runs `function` with the value when this future succeeds; otherwise skips it and passes
    /// the error on.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives the successful value and returns the next value.
    /// - Returns: A future with what `function` returns, or this future's error.
    @inlinable
    public func pipe<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        into function: @escaping @Sendable (Value) -> Out
    ) -> FutureResult<Out> {
        let next = PipeLink<Value, Out>(function)
        observe(Callback(queue: queue) { next.receive($0) })
        return next
    }
}

extension FutureResult where Value: Sequence, Value.Element: Sendable {
    /// Keeps the elements of the sequence that `isIncluded` accepts.
    ///
    /// Skipped when this future failed. An error `isIncluded` throws becomes the result.
    ///
    /// - Parameters:
    ///   - queue: Where `isIncluded` runs. Defaults to ``CallbackQueue/default``.
    ///   - isIncluded: Says whether an element stays.
    /// - Returns: A future of the kept elements, in order, or the error.
    public func filter(
        upon queue: DispatchQueue = CallbackQueue.default,
        _ isIncluded: @escaping @Sendable (Value.Element) throws -> Bool
    ) -> FutureResult<[Value.Element]> {
        pipe(upon: queue) { (sequence: Value) throws -> [Value.Element] in
            try sequence.filter(isIncluded)
        }
    }

    /// Transforms each element of the sequence.
    ///
    /// Skipped when this future failed. An error `transform` throws becomes the result.
    ///
    /// - Parameters:
    ///   - queue: Where `transform` runs. Defaults to ``CallbackQueue/default``.
    ///   - transform: Turns one element into one new element.
    /// - Returns: A future of the transformed elements, in order, or the error.
    public func map<Out: Sendable>(
        upon queue: DispatchQueue = CallbackQueue.default,
        _ transform: @escaping @Sendable (Value.Element) throws -> Out
    ) -> FutureResult<[Out]> {
        pipe(upon: queue) { (sequence: Value) throws -> [Out] in
            try sequence.map(transform)
        }
    }
}
