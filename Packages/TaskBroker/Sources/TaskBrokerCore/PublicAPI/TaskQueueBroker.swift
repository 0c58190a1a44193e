import Foundation
import Logging
import QueueRetry
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
    /// The broker's name: the prefix of the queues it claims (unless it claims by filter).
    public let name: String
    /// The database the broker runs.
    public let database: TaskDatabase
    private let engine: any BrokerEngineProtocol
    private let registration: BrokerRegistration
    private let shutdownTimeout: Duration
    private let sleep: @Sendable (Duration) async throws -> Void
    private let driver: Driver

    private init(
        name: String, database: TaskDatabase, engine: any BrokerEngineProtocol, registration: BrokerRegistration,
        shutdownTimeout: Duration, sleep: @escaping @Sendable (Duration) async throws -> Void
    ) {
        self.name = name
        self.database = database
        self.engine = engine
        self.registration = registration
        self.shutdownTimeout = shutdownTimeout
        self.sleep = sleep
        self.driver = Driver(engine: engine)
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
        // Queue names are stored in one spelling (NFC), and so is the prefix they are compared with.
        let name = name.normalizedName
        return try await make(
            database: database, name: name, handler: handler, configuration: configuration, clock: clock,
            isPrefixClaim: true, filter: { [name] queueName in queueName.utf8.starts(with: name.utf8) }
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
        let prefixes = configuration.rateLimits.map(\.prefix)
        if let twice = prefixes.first(where: { prefix in prefixes.filter { $0 == prefix }.count > 1 }) {
            throw TaskBrokerError(
                code: .invalidArgument,
                message: "Two rate limits are given for the prefix \"\(twice)\"; give each prefix one limit (scope .eachQueue for a limit per queue)."
            )
        }
        // Registered and listening before the stored queues are listed: a change committed from
        // now on reaches this broker (held until its engine exists), and one committed before is
        // in the list. Listening only after the list, a save into a new queue committed between
        // the two reached no one.
        let registration = try await database.register(BrokerClaim(name: name, isPrefixClaim: isPrefixClaim))
        let early = EarlyChanges()
        registration.listen { changes in early.deliver(changes) }
        // The first page of stored queues; the engine lists the others as it runs out of queues
        // to read, so a broker over 100,000 queues starts after one page.
        let mine: [String]
        let listedThrough: String?
        do {
            let page = try await database.storage.queueNames(after: nil, limit: BrokerEngine<Handler>.queueNamesPerPage)
            listedThrough = page.count >= BrokerEngine<Handler>.queueNamesPerPage ? page.last : nil
            mine = page.filter(filter)
            try registration.claim(mine)
        } catch {
            await registration.cancel()
            throw error
        }
        let time = BrokerTime(clock: clock, wallClock: configuration.wallClock)
        // Plain parallel actions: a prefix broker claims them by its prefix in the database; a
        // filter broker lists their queues' names and applies its filter before each claim.
        let parallelScope: (@Sendable () async throws -> TaskParallelScope)?
        if let parallel = database.storage as? any ParallelTaskStorage {
            if isPrefixClaim {
                parallelScope = { @Sendable [name] in .prefix(name) }
            } else {
                parallelScope = { @Sendable in .queues(try await parallel.parallelQueueNames().filter(filter)) }
            }
        } else {
            parallelScope = nil
        }
        let engine = BrokerEngine(
            name: name, brokerID: registration.brokerID, handler: handler, storage: database.storage,
            registry: database.registry, configuration: configuration, time: time, initialQueues: mine,
            listedThrough: listedThrough, claimFilter: filter, parallelScope: parallelScope
        )
        // The changes heard so far, then every later one: a save that lands during the load is
        // applied after it.
        early.forward { changes in engine.apply(changes) }
        let broker = TaskQueueBroker(
            name: name, database: database, engine: engine, registration: registration,
            shutdownTimeout: configuration.shutdownTimeout, sleep: time.sleep
        )
        if configuration.startsAutomatically {
            broker.start()
        }
        configuration.logger.debug("broker \(name) set up with \(mine.count) stored queue(s)")
        return broker
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
    ///
    /// The broker then runs in a task of its own that ``shutdown()`` ends and waits for. To run it
    /// in a task of yours instead, call ``run()`` (a `ServiceGroup` does) rather than `start()`.
    public func start() {
        driver.startInOwnTask()
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

    /// The engine's own bookkeeping (actions in flight, timers held), for tests.
    func engineView() -> BrokerView {
        engine.view()
    }

    /// The state of every stored queue this broker claims, including the action it is running and
    /// whether it waits on storage.
    ///
    /// - Returns: One snapshot per queue, sorted by name.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    public func snapshot() async throws -> [TaskQueueSnapshot] {
        let view = engine.view()
        var snapshots = try await database.snapshot().filter { engine.accepts($0.name) }
        for index in snapshots.indices {
            snapshots[index].inFlight = view.inFlight[snapshots[index].name]
            snapshots[index].storageFailure = view.storageFailures[snapshots[index].name]
        }
        let listed = Set(snapshots.map(\.name))
        for queueName in Set(view.inFlight.keys).union(view.storageFailures.keys) where !listed.contains(queueName) {
            snapshots.append(TaskQueueSnapshot(
                name: queueName, pending: 0, inFlight: view.inFlight[queueName], storageFailure: view.storageFailures[queueName]
            ))
        }
        return snapshots.sorted { $0.name < $1.name }
    }

    /// Stops taking actions and waits for the running handlers, up to the configured
    /// `shutdownTimeout`; their outcomes are stored. After the timeout the handlers still running
    /// are cancelled (an ``AsyncTaskQueueHandler`` sees `Task.isCancelled`) and what they return is
    /// ignored: their actions stay stored and run again at the next start. Outcomes that arrived
    /// before are stored.
    ///
    /// When it returns, no task or thread of the broker is left: no handler starts and nothing is
    /// written any more. (A handler that ignores cancellation is your code and keeps running, but
    /// the broker no longer waits for it or listens to it.) Calling it again does nothing.
    public func shutdown() async {
        engine.stop()
        // A broker that never started starts only to stop at once (it runs nothing new).
        driver.startInOwnTask()
        let timeout = shutdownTimeout
        let sleep = self.sleep
        let engine = self.engine
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await engine.finished.wait() }
            group.addTask { try? await sleep(timeout) }
            await group.next()
            engine.abandon()
            group.cancelAll()
        }
        await driver.wait()
        await registration.cancel()
    }

    /// Runs the broker in the calling task until the service group shuts down gracefully
    /// (SIGTERM) or the task is cancelled, then shuts it down (see ``shutdown()``).
    ///
    /// With ``Configuration/startsAutomatically`` `false` the broker runs right here, in your task;
    /// if `setup` already started it, `run()` ties its life to your task (a `ServiceGroup`).
    ///
    /// - Throws: Nothing today; `throws` for `Service`.
    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.driver.runHere() }
            group.addTask {
                // Returns when the service group shuts down gracefully; throws when this task is
                // cancelled (then the shutdown gives running handlers no time).
                try? await gracefulShutdown()
                await self.shutdown()
            }
            // The driver ends only through a shutdown (this one, or the user's own call).
            await group.next()
            group.cancelAll()
        }
    }
}

/// Where a broker's driver runs: in a task of its own (`setup`, ``TaskQueueBroker/start()``) or in
/// the task that calls ``TaskQueueBroker/run()``; whichever comes first, once.
final class Driver: Sendable {
    private enum State {
        case idle
        case ownTask(Task<Void, Never>)
        case callersTask
    }

    private let engine: any BrokerEngineProtocol
    private let state = Mutex(State.idle)

    init(engine: any BrokerEngineProtocol) {
        self.engine = engine
    }

    /// Starts the driver in a task of its own, unless it already runs. ``wait()`` joins that task.
    func startInOwnTask() {
        state.withLock { state in
            guard case .idle = state else { return }
            let engine = self.engine
            state = .ownTask(Task { await engine.run() })
        }
    }

    /// Runs the driver in the calling task, or waits for it if it already runs elsewhere.
    func runHere() async {
        let runsHere = state.withLock { state -> Bool in
            guard case .idle = state else { return false }
            state = .callersTask
            return true
        }
        if runsHere {
            await engine.run()
        } else {
            await engine.finished.wait()
        }
    }

    /// Returns once the driver has ended and every task it owns with it.
    func wait() async {
        if case .ownTask(let task) = state.withLock({ $0 }) {
            await task.value
        }
        await engine.finished.wait()
    }
}

/// The changes a broker hears before its engine exists, in order, then handed to the engine.
private final class EarlyChanges: Sendable {
    private let state = Mutex<(held: [[TaskChange]], target: (@Sendable ([TaskChange]) -> Void)?)>(([], nil))

    /// Holds `changes` until ``forward(_:)``, or hands them over at once after it.
    func deliver(_ changes: [TaskChange]) {
        let target = state.withLock { state -> (@Sendable ([TaskChange]) -> Void)? in
            if let target = state.target { return target }
            state.held.append(changes)
            return nil
        }
        // Outside the lock (the engine decodes the saved actions): a target is set only once the
        // held changes were handed over.
        target?(changes)
    }

    /// Hands the held changes to `target`, in order, then every later one.
    func forward(_ target: @escaping @Sendable ([TaskChange]) -> Void) {
        state.withLock { state in
            for changes in state.held {
                target(changes)
            }
            state.held = []
            state.target = target
        }
    }
}
