public import Dispatch
public import Synchronization

/// A future of a `Result`: a value, or the error that prevented it.
///
/// Chain steps with ``pipe(upon:into:)-9qusn``: when a step fails or throws,
/// the steps after it are skipped and the final handler receives that error.
///
/// ```swift
/// webclient.findBooks(query)              // -> FutureResult<[BookModel]>
///     .timeoutAfter(interval: 10.0)
///     .pipe(into: datastore.saveBooks(_:))
///     .filter(isBookInStock(_:))
///     .map(convertBookModelToBookViewMaster(_:))
///     .then(handleResult: updateTableView(_:))
/// ```
///
/// Handlers follow the rules of ``Future``: attached before the fill they run at the fill,
/// after it at once, always asynchronously on their `upon:` queue; a filled future drops its
/// handlers. `FutureResult` is `Sendable`; its only public subclass is ``DeferredResult``.
// `@unchecked` because the class is not final (``DeferredResult`` and the internal
// `PipeLink` subclass it) and `storage` is a `var` beside its lock rather than inside it.
// Safe: `storage` is read and written only inside `withState`, that is under `lock` (and by
// `deinit`, which no other access can overlap); the class
// is not `open`, `DeferredResult` adds no state and `PipeLink` adds a `@Sendable` closure that
// only the one handler it attaches reads and clears (see `PipeLink`).
public class FutureResult<Value: Sendable>: @unchecked Sendable {
    // The lock and the state it guards are two stored properties instead of one
    // `Mutex<ResultState<Value>>`: destroying a `Mutex` of a generic type looked up three
    // generic types at run time (`ResultState`, `Mutex`, `_Cell`), a sixth of a chain link;
    // a `Mutex<Void>` needs none, and `ResultState<Value>`, whose layout does not depend on
    // `Value` (see `ValueSlot`), none either.
    @usableFromInline let lock: Mutex<Void>
    // Only inside `withState`, so never two accesses at once (no dynamic check needed).
    @exclusivity(unchecked) @usableFromInline var storage: ResultState<Value>

    /// Creates an unfilled future; ``DeferredResult`` is the public way to make one.
    @inlinable
    init() {
        lock = Mutex(())
        storage = ResultState()
    }

    /// Creates a future that already holds `result`.
    ///
    /// - Parameter result: The result of the future.
    @inlinable
    public init(result: Result<Value, any Error>) {
        lock = Mutex(())
        storage = ResultState(value: result)
    }

    deinit {
        // The value lives in a `ValueSlot`, which the state's own destruction leaves alone.
        // `SlotWords` rather than a method of the state: see `ValueSlot.destroy()`.
        SlotWords.destroy(&storage.success.words, isSet: &storage.success.isSet, as: Value.self)
    }

    /// Runs `body` on the state, under the lock: the only way to reach `storage`.
    @inlinable
    final func withState<Outcome: Sendable>(_ body: (inout ResultState<Value>) -> Outcome) -> Outcome {
        lock.withLock { _ in body(&storage) }
    }

    /// Creates a future that already holds the value `value`.
    ///
    /// - Parameter value: The successful value of the future.
    @inlinable
    public convenience init(value: Value) {
        self.init(result: .success(value))
    }

    /// Creates a future that already holds the failure `error`.
    ///
    /// - Parameter error: The error of the future.
    public convenience init(error: any Error) {
        self.init(result: .failure(error))
    }

    /// Creates a future filled with what `operation` returns or throws, run in a new task.
    ///
    /// ```swift
    /// let html = FutureResult { try await loader.load(url) }
    /// ```
    ///
    /// - Parameters:
    ///   - priority: The priority of the task that runs `operation`.
    ///   - operation: The asynchronous work that produces the value.
    public convenience init(
        priority: TaskPriority? = nil,
        operation: @escaping @Sendable () async throws -> Value
    ) {
        self.init()
        Task(priority: priority) { [self] in
            do {
                _ = self.complete(.success(try await operation()))
            } catch {
                _ = self.complete(.failure(error))
            }
        }
    }

    /// Creates a future that holds the value of `future`, once it is filled.
    ///
    /// - Parameter future: A future that cannot fail.
    public convenience init(_ future: Future<Value>) {
        self.init()
        future.observe(Callback(queue: nil) { [self] value in
            _ = self.complete(.success(value))
        })
    }

    /// Whether the future has been filled.
    public var isFilled: Bool {
        withState { $0.isFilled }
    }

    /// Attaches a handler that receives the result.
    ///
    /// The handler runs asynchronously on `queue`: at the fill when attached before it, at once
    /// when attached after it.
    ///
    /// - Parameters:
    ///   - queue: Where `handler` runs. Defaults to ``CallbackQueue/default`` (the main queue
    ///     unless the process changed it).
    ///   - handler: Receives `.success(value)` or `.failure(error)`.
    @inlinable
    public func then(
        upon queue: DispatchQueue = CallbackQueue.default,
        handleResult handler: @escaping ResultHandler<Value>
    ) {
        observe(Callback(queue: queue, body: handler))
    }

    /// Attaches a callback; runs it at once (as scheduled) when the future is filled.
    @inlinable
    final func observe(_ callback: consuming Callback<Result<Value, any Error>>) {
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
    final func complete(_ result: Result<Value, any Error>) -> Bool {
        let drain = DrainContext.current
        switch withState({ $0.fill(result, drain: drain) }) {
        case .alreadyFilled:
            return false
        case .run(let callbacks):
            callbacks.run(with: result)
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
            unsafeDowncast(future, to: FutureResult<Value>.self).runPending()
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
