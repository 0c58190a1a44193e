public import Dispatch

extension Future {
    /// Chains a function that returns a future: its future's value becomes the value of the
    /// returned future.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives this future's value and returns the next future.
    /// - Returns: A future filled with the value of the future that `function` returns.
    @inlinable
    public func then<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        pipeInto function: @escaping @Sendable (Value) -> Future<Out>
    ) -> Future<Out> {
        pipe(upon: queue, into: function)
    }

    /// Chains a function that returns a value: its result becomes the value of the returned
    /// future.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives this future's value and returns the next value.
    /// - Returns: A future filled with what `function` returns.
    @inlinable
    public func then<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        pipeInto function: @escaping @Sendable (Value) -> Out
    ) -> Future<Out> {
        pipe(upon: queue, into: function)
    }

    /// Chains a function that returns a future: its future's value becomes the value of the
    /// returned future.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives this future's value and returns the next future.
    /// - Returns: A future filled with the value of the future that `function` returns.
    @inlinable
    public func pipe<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        into function: @escaping @Sendable (Value) -> Future<Out>
    ) -> Future<Out> {
        let next = Future<Out>()
        observe(Callback(queue: queue) { value in
            function(value).observe(Callback(queue: nil) { _ = next.complete($0) })
        })
        return next
    }

    /// Chains a function that returns a value: its result becomes the value of the returned
    /// future.
    ///
    /// - Parameters:
    ///   - queue: Where `function` runs. Defaults to ``CallbackQueue/default``.
    ///   - function: Receives this future's value and returns the next value.
    /// - Returns: A future filled with what `function` returns.
    @inlinable
    public func pipe<Out>(
        upon queue: DispatchQueue = CallbackQueue.default,
        into function: @escaping @Sendable (Value) -> Out
    ) -> Future<Out> {
        let next = Future<Out>()
        observe(Callback(queue: queue) { value in
            _ = next.complete(function(value))
        })
        return next
    }
}

extension Future where Value: Sequence, Value.Element: Sendable {
    /// Keeps the elements of the sequence that `isIncluded` accepts.
    ///
    /// - Parameters:
    ///   - queue: Where `isIncluded` runs. Defaults to ``CallbackQueue/default``.
    ///   - isIncluded: Says whether an element stays.
    /// - Returns: A future of the kept elements, in order.
    public func filter(
        upon queue: DispatchQueue = CallbackQueue.default,
        _ isIncluded: @escaping @Sendable (Value.Element) -> Bool
    ) -> Future<[Value.Element]> {
        pipe(upon: queue) { $0.filter(isIncluded) }
    }

    /// Transforms each element of the sequence.
    ///
    /// - Parameters:
    ///   - queue: Where `transform` runs. Defaults to ``CallbackQueue/default``.
    ///   - transform: Turns one element into one new element.
    /// - Returns: A future of the transformed elements, in order.
    public func map<Out: Sendable>(
        upon queue: DispatchQueue = CallbackQueue.default,
        _ transform: @escaping @Sendable (Value.Element) -> Out
    ) -> Future<[Out]> {
        pipe(upon: queue) { $0.map(transform) }
    }
}
