public import Dispatch
public import Synchronization

/// A container that is filled with a value once, asynchronously.
///
/// An asynchronous function returns a `Future` at once and fills it later, through the
/// ``Deferred`` it created; callers can only attach handlers, never fill it.
///
/// ```swift
/// func calculateFibonacciNumber(_ index: UInt8) -> Future<UInt64> {
///     let deferred = Deferred<UInt64>()
///     DispatchQueue.global().async { deferred.fill(value: fibonacci(index)) }
///     return deferred
/// }
///
/// calculateFibonacciNumber(63).then { number in print(number) }
/// ```
///
/// - A handler attached before the fill runs at the fill; one attached after it runs at once.
/// - Every handler is dispatched asynchronously on its `upon:` queue: never inside `then` or
///   `fill`. Handlers for the same queue run in the order they were attached.
/// - Once filled, a future drops its handlers, so closures that capture it do not leak.
///
/// `Future` is `Sendable`, and its `Value` must be `Sendable`: the value is handed to handlers
/// on other queues and to awaiting tasks. Its only stored state is behind a `Mutex`, and the
/// only subclass is ``Deferred``, which adds no stored state.
// `@unchecked` because the class is not final (``Deferred`` subclasses it) and `storage` is a
// `var` beside its lock rather than inside it. Safe: `storage` is read and written only inside
// `withState`, that is under `lock` (and by `deinit`, which no other access can overlap); the
// class is not `open`, and `Deferred` adds no state.
public class Future<Value: Sendable>: @unchecked Sendable {
    // The lock and the state it guards are two stored properties instead of one
    // `Mutex<CallbackState<Value>>`, as in `FutureResult`: destroying a `Mutex` of a generic
    // type looked up three generic types at run time (`CallbackState`, `Mutex`, `_Cell`), about
    // a quarter of the instructions of a future made, observed and filled; a `Mutex<Void>` and a
    // `CallbackState<Value>`, whose layout does not depend on `Value` (see `ValueSlot`), need none.
    @usableFromInline let lock: Mutex<Void>
    // Only inside `withState`, so never two accesses at once (no dynamic check needed).
    @exclusivity(unchecked) @usableFromInline var storage: CallbackState<Value>

    /// Creates an unfilled future; ``Deferred`` is the public way to make one.
    @inlinable
    init() {
        lock = Mutex(())
        storage = CallbackState()
    }

    /// Creates a future that is already filled with `value`.
    ///
    /// - Parameter value: The value of the future.
    @inlinable
    public init(value: Value) {
        lock = Mutex(())
        storage = CallbackState(value: value)
    }

    deinit {
        // The value lives in a `ValueSlot`, which the state's own destruction leaves alone.
        // `SlotWords` rather than a method of the state: see `ValueSlot.destroy()`.
        SlotWords.destroy(&storage.slot.words, isSet: &storage.slot.isSet, as: Value.self)
    }

    /// Runs `body` on the state, under the lock: the only way to reach `storage`.
    @inlinable
    final func withState<Outcome: Sendable>(_ body: (inout CallbackState<Value>) -> Outcome) -> Outcome {
        lock.withLock { _ in body(&storage) }
    }

    /// Creates a future filled with the value that `operation` returns, run in a new task.
    ///
    /// - Parameters:
    ///   - priority: The priority of the task that runs `operation`.
    ///   - operation: The asynchronous work that produces the value.
    public convenience init(
        priority: TaskPriority? = nil,
        operation: @escaping @Sendable () async -> Value
    ) {
        self.init()
        Task(priority: priority) { [self] in
            self.complete(await operation())
        }
    }

    /// Whether the future has been filled.
    public var isFilled: Bool {
        withState { $0.isFilled }
    }

    /// Attaches a handler that receives the value.
    ///
    /// The handler runs asynchronously on `queue`: at the fill when attached before it, at once
    /// when attached after it.
    ///
    /// - Parameters:
    ///   - queue: Where `handler` runs. Defaults to ``CallbackQueue/default`` (the main queue
    ///     unless the process changed it).
    ///   - handler: Receives the value.
    @inlinable
    public func then(
        upon queue: DispatchQueue = CallbackQueue.default,
        run handler: @escaping @Sendable (Value) -> Void
    ) {
        observe(Callback(queue: queue, body: handler))
    }

    /// Attaches a callback; runs it at once (as scheduled) when the future is filled.
    @inlinable
    final func observe(_ callback: consuming Callback<Value>) {
        // Moved into the state through an optional, not copied: a copy retains the queue and
        // the handler's context and releases them again (a sixth of the time spent building a
        // chain).
        var callback = Optional(callback)
        if let value = withState({ $0.add(&callback) }), let callback = callback.take() {
            Scheduler.schedule(callback, with: value)
        }
    }

    /// Fills the future unless it is filled already, then schedules its handlers.
    ///
    /// - Returns: `false` when the future was already filled; nothing changes then.
    @inlinable
    final func complete(_ value: Value) -> Bool {
        let drain = DrainContext.current
        switch withState({ $0.fill(value, drain: drain) }) {
        case .alreadyFilled:
            return false
        case .run(let callbacks):
            callbacks.run(with: value)
        case .appendToDrain:
            // `drain` is not nil: `fill` returns `.appendToDrain` only when it is.
            drain?.appendReady(readyFuture)
        case .dispatchPending(let queue):
            drain?.seal()
            DrainContext.dispatch(readyFuture, on: queue)
        }
        return true
    }

    /// This future, for a block's job list, once ``complete(_:)`` has left its handler pending.
    @inlinable
    final var readyFuture: ReadyFuture {
        ReadyFuture(future: self) { future in
            // Only `readyFuture` puts a future in a `ReadyFuture` with this function, so `future`
            // is of this type.
            unsafeDowncast(future, to: Future<Value>.self).runPending()
        }
    }

    /// Runs the handler that ``complete(_:)`` left pending for the block that runs it.
    @inlinable
    final func runPending() {
        if let (callback, value) = withState({ $0.takePending() }) {
            callback.body(value)
        }
    }
}
