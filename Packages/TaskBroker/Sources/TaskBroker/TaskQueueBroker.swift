public import Foundation
public import Logging
public import ServiceLifecycle
import Synchronization

/// Runs the actions of the queues it claims with one handler: each queue one action at a time,
/// head first; different queues side by side.
///
/// ```swift
/// let database = try await TaskDatabase.sqlite(path: path)
/// let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
/// try await database.save(action)   // queueName "handler1-queue2": this broker runs it
/// ```
///
/// `setup` starts the broker at once: actions already stored start without any new write, and
/// every save made through the same ``TaskDatabase`` wakes it without polling. Success deletes
/// an action; a failure pauses its queue and retries the same action after the handler's
/// timeout (at once for `0`), or waits for ``restartQueues(_:)`` (for a negative timeout).
/// Pauses, attempts and retry times are stored, so a broker started again on the same file
/// carries on where the last one stopped.
///
/// The broker is a swift-service-lifecycle `Service`: add it to a `ServiceGroup` and SIGTERM
/// shuts it down gracefully.
public final class TaskQueueBroker: Service, Sendable {
    /// Tunables of a broker; every field has a default.
    public struct Configuration: Sendable {
        /// How many queues run an action at the same time. Queues wait for a slot in turn, so a
        /// long queue does not starve the others. Defaults to 16.
        public var maxConcurrentQueues: Int
        /// How long ``shutdown()`` waits for running handlers. Defaults to 30 s.
        public var shutdownTimeout: Duration
        /// How long a claim on a queue lasts on a backend shared by several processes. Defaults to 60 s.
        public var leaseDuration: Duration
        /// Where the broker logs; silent by default.
        public var logger: Logger
        /// Reads the wall clock once, when the broker starts, to relate stored retry dates to the
        /// injected clock. Inject a fixed date in tests.
        public var wallClock: @Sendable () -> Date
        /// Whether `setup` starts the broker (the default). With `false`, `setup` claims the queues
        /// and listens for saves but runs nothing until ``TaskQueueBroker/start()``: subscribe to
        /// ``TaskQueueBroker/events`` in between to receive every event from the first one.
        public var startsAutomatically: Bool

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - maxConcurrentQueues: How many queues run at once; at least 1.
        ///   - shutdownTimeout: How long ``shutdown()`` waits for running handlers.
        ///   - leaseDuration: How long a queue claim lasts on a shared backend.
        ///   - logger: Where the broker logs.
        ///   - wallClock: The wall clock, read once at start.
        ///   - startsAutomatically: Whether `setup` starts the broker; `false` waits for ``TaskQueueBroker/start()``.
        public init(
            maxConcurrentQueues: Int = 16,
            shutdownTimeout: Duration = .seconds(30),
            leaseDuration: Duration = .seconds(60),
            logger: Logger = Logger(label: "TaskBroker", factory: { _ in SwiftLogNoOpLogHandler() }),
            wallClock: @escaping @Sendable () -> Date = { Date() },
            startsAutomatically: Bool = true
        ) {
            self.maxConcurrentQueues = max(1, maxConcurrentQueues)
            self.shutdownTimeout = shutdownTimeout
            self.leaseDuration = leaseDuration
            self.logger = logger
            self.wallClock = wallClock
            self.startsAutomatically = startsAutomatically
        }
    }

    /// The broker's name: the prefix of the queues it claims (unless it claims by filter).
    public let name: String
    /// The database the broker runs.
    public let database: TaskDatabase
    private let engine: any BrokerEngineProtocol
    private let brokerID: UInt64
    private let listenerID: UInt64
    private let shutdownTimeout: Duration
    private let sleep: @Sendable (Duration) async throws -> Void
    private let starter: Starter

    private init(
        name: String, database: TaskDatabase, engine: any BrokerEngineProtocol, brokerID: UInt64, listenerID: UInt64,
        shutdownTimeout: Duration, sleep: @escaping @Sendable (Duration) async throws -> Void, starter: Starter
    ) {
        self.name = name
        self.database = database
        self.engine = engine
        self.brokerID = brokerID
        self.listenerID = listenerID
        self.shutdownTimeout = shutdownTimeout
        self.sleep = sleep
        self.starter = starter
    }

    /// Sets up and starts a broker that claims every queue whose name starts with `name`
    /// (`"handler1-queue2"` for `"handler1"`; see ``queueName(withSuffix:)``).
    ///
    /// - Parameters:
    ///   - database: Where the actions are stored.
    ///   - name: The broker's name and the prefix of its queues; not empty.
    ///   - handler: Runs the actions.
    ///   - configuration: Concurrency, shutdown and logging tunables.
    ///   - clock: The clock for timed retries and the shutdown timeout.
    /// - Returns: The running broker.
    /// - Throws: ``TaskBrokerError`` with code `.queueAlreadyClaimed` when another broker of this
    ///   process claims the same name or an overlapping prefix, `.invalidName` for an empty name,
    ///   `.storageFailed` when the stored queues cannot be read.
    public static func setup<Handler: TaskQueueHandler>(
        database: TaskDatabase,
        name: String,
        handler: Handler,
        configuration: Configuration = .init(),
        clock: some Clock<Duration> = ContinuousClock()
    ) async throws -> TaskQueueBroker {
        guard !name.isEmpty else {
            throw TaskBrokerError(
                code: .invalidName,
                message: "A broker name is the prefix of its queues and cannot be empty; pass a name, or claim queues with a filter."
            )
        }
        return try await make(
            database: database, name: name, handler: handler, configuration: configuration, clock: clock,
            isPrefixClaim: true, filter: { [name] queueName in queueName.hasPrefix(name) }
        )
    }

    /// Sets up and starts a broker that claims every queue for which `filter` returns `true`
    /// (the seed's `setupWithDatabase(_:name:handler:) { queueName in … }`).
    ///
    /// - Parameters:
    ///   - database: Where the actions are stored.
    ///   - name: The broker's name.
    ///   - handler: Runs the actions.
    ///   - configuration: Concurrency, shutdown and logging tunables.
    ///   - clock: The clock for timed retries and the shutdown timeout.
    ///   - filter: Returns `true` for a queue name this broker handles. Keep it fast and pure.
    /// - Returns: The running broker.
    /// - Throws: ``TaskBrokerError`` with code `.queueAlreadyClaimed` when another broker of this
    ///   process has the same name or already owns a stored queue that `filter` accepts,
    ///   `.storageFailed` when the stored queues cannot be read.
    public static func setup<Handler: TaskQueueHandler>(
        database: TaskDatabase,
        name: String,
        handler: Handler,
        configuration: Configuration = .init(),
        clock: some Clock<Duration> = ContinuousClock(),
        filter: @escaping @Sendable (_ queueName: String) -> Bool
    ) async throws -> TaskQueueBroker {
        try await make(
            database: database, name: name, handler: handler, configuration: configuration, clock: clock,
            isPrefixClaim: false, filter: filter
        )
    }

    private static func make<Handler: TaskQueueHandler>(
        database: TaskDatabase, name: String, handler: Handler, configuration: Configuration,
        clock: some Clock<Duration>, isPrefixClaim: Bool, filter: @escaping @Sendable (String) -> Bool
    ) async throws -> TaskQueueBroker {
        let stored = try await database.storage.queueNames()
        let mine = stored.filter(filter)
        let brokerID = try database.registry.register(.init(name: name, isPrefixClaim: isPrefixClaim), claiming: mine)
        let time = BrokerTime(clock: clock, wallClock: configuration.wallClock)
        let engine = BrokerEngine(
            name: name, brokerID: brokerID, handler: handler, storage: database.storage, registry: database.registry,
            configuration: configuration, time: time, claimFilter: filter
        )
        // Listen before loading: a save that lands during the load is applied after it.
        let listenerID = database.notifier.add { [mailbox = engine.mailbox] changes in
            mailbox.post(.changes(changes))
        }
        let starter = Starter {
            Task {
                await engine.run(initialQueues: mine)
            }
        }
        if configuration.startsAutomatically {
            starter.start()
        }
        configuration.logger.debug("broker \(name) set up with \(mine.count) stored queue(s)")
        return TaskQueueBroker(
            name: name, database: database, engine: engine, brokerID: brokerID, listenerID: listenerID,
            shutdownTimeout: configuration.shutdownTimeout, sleep: time.sleep, starter: starter
        )
    }

    /// Starts a broker set up with ``Configuration/startsAutomatically`` `false`: stored actions
    /// start, and so do those saved since `setup` (they were not lost, only held). Calling it
    /// again, or on a broker that started at `setup`, does nothing.
    ///
    /// ```swift
    /// let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler,
    ///                                              configuration: .init(startsAutomatically: false))
    /// let events = broker.events      // sees everything, from the first `.started`
    /// broker.start()
    /// ```
    public func start() {
        starter.start()
    }

    /// The name of a queue this broker claims: `name + "-" + suffix`.
    ///
    /// - Parameter suffix: What tells this queue apart from the broker's other queues.
    /// - Returns: `"handler1-queue2"` for the broker `"handler1"` and the suffix `"queue2"`.
    public func queueName(withSuffix suffix: String) -> String {
        "\(name)-\(suffix)"
    }

    /// Resumes paused queues: each runs its paused action again at once. The stored pause is
    /// cleared, so the queues stay resumed after a restart.
    ///
    /// - Parameter names: The queues to resume.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    public func restartQueues(_ names: [String]) async throws {
        try await database.restartQueues(names)
    }

    /// What the broker does, as it happens. Each access returns a new stream that receives the
    /// events from then on; it finishes after ``TaskBrokerEvent/stopped``.
    ///
    /// A broker started by `setup` may already have run actions when this is first read; to miss
    /// nothing, set ``Configuration/startsAutomatically`` to `false`, subscribe, then call ``start()``.
    public var events: AsyncStream<TaskBrokerEvent> {
        engine.events.stream()
    }

    /// The state of every stored queue this broker claims, including the action it is running.
    ///
    /// - Returns: One snapshot per queue, sorted by name.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    public func snapshot() async throws -> [TaskQueueSnapshot] {
        let inFlight = engine.inFlight()
        var snapshots = try await database.snapshot().filter { engine.accepts($0.name) }
        for index in snapshots.indices {
            snapshots[index].inFlight = inFlight[snapshots[index].name]
        }
        for (queueName, key) in inFlight where !snapshots.contains(where: { $0.name == queueName }) {
            snapshots.append(TaskQueueSnapshot(name: queueName, pending: 0, inFlight: key))
        }
        return snapshots.sorted { $0.name < $1.name }
    }

    /// Stops taking actions and waits for the running handlers, up to the configured
    /// `shutdownTimeout`. Their outcomes are stored; an action whose handler has not finished by
    /// then stays stored and runs again at the next start. Calling it again does nothing.
    public func shutdown() async {
        // A broker that never started starts only to stop at once (it runs nothing new).
        engine.stop(abandon: false)
        starter.start()
        let timeout = shutdownTimeout
        let sleep = self.sleep
        let engine = self.engine
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await engine.finished.wait() }
            group.addTask { try? await sleep(timeout) }
            await group.next()
            engine.stop(abandon: true)
            group.cancelAll()
        }
        await engine.finished.wait()
        database.notifier.remove(listenerID)
        database.registry.unregister(brokerID)
    }

    /// Runs until the service group shuts down gracefully (SIGTERM) or the task is cancelled,
    /// then calls ``shutdown()``. The broker already runs from `setup` (or starts here if it was
    /// set up with ``Configuration/startsAutomatically`` `false`); `run()` ties its life to a
    /// `ServiceGroup`.
    ///
    /// - Throws: Nothing today; `throws` for `Service`.
    public func run() async throws {
        start()
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await engine.finished.wait()
            } onGracefulShutdown: {
                Task { await self.shutdown() }
            }
        } onCancel: {
            Task { await self.shutdown() }
        }
    }
}

/// Runs a start closure once.
final class Starter: Sendable {
    private let pending: Mutex<(@Sendable () -> Void)?>

    init(_ start: @escaping @Sendable () -> Void) {
        pending = Mutex(start)
    }

    func start() {
        let start = pending.withLock { pending in
            defer { pending = nil }
            return pending
        }
        start?()
    }
}
