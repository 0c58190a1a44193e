import Foundation
import Logging
import Metrics
import QueueRetry
import Synchronization

/// The part of a broker that does not depend on the handler's type.
protocol BrokerEngineProtocol: Sendable {
    var events: EventBroadcaster<TaskBrokerEvent> { get }
    var finished: Latch { get }
    /// Runs the broker until it stops; returns only when no task or thread of it is left.
    func run() async
    /// Stops taking actions; running handlers finish and their outcomes are stored.
    func stop()
    /// Gives up on running handlers (the shutdown timeout passed): cancels them and ignores what they return.
    func abandon()
    /// What the broker runs and what waits on storage, per queue.
    func view() -> BrokerView
    func accepts(_ queueName: String) -> Bool
    /// Applies committed changes (a listener of the database's notifier).
    func apply(_ changes: [TaskChange])
}

/// What ``TaskQueueBroker/snapshot()`` adds to the stored state.
struct BrokerView: Sendable {
    /// The key of the action in flight, per queue.
    var inFlight: [String: String] = [:]
    /// Why a queue waits on storage, per queue.
    var storageFailures: [String: String] = [:]
    /// Timers started and neither fired nor cancelled.
    var timers = 0
    /// Timers the state machine waits for: `timers` less any the engine failed to drop.
    var machineTimers = 0
    /// Of `machineTimers`, those that end a head's pause (timed retries).
    var pauseTimers = 0
    /// Of `machineTimers`, the one of the next lease renewal (shared backends, while actions run): 0 or 1.
    var renewalTimers = 0
    /// Queues the broker keeps in memory.
    var queues = 0
    /// Claims of plain parallel actions sent so far.
    var parallelClaims = 0
}

/// The thin async shell around ``BrokerStateMachine``: it feeds the machine what happened and
/// carries out what the machine decides, inside one task group owned by ``run()``.
///
/// Handlers, timers, loads, claims and the committer report back through one ``Mailbox``; the
/// driver loop takes everything posted so far in one go, hands it to the machine, and performs
/// the outputs. Nothing here decides anything: the rules live in the machine and are tested there.
final class BrokerEngine<Handler: TaskQueueHandler>: BrokerEngineProtocol {
    let name: String
    let owner: String
    /// How an action is run: ``AsyncTaskQueueHandler/handle(_:context:)`` when the handler has
    /// the `async` form (decided once, not per action), else its callback bridged to `async`.
    let handle: @Sendable (Handler.Action, TaskContext) async -> TaskResult
    let storage: any TaskStorage
    /// `storage` when it is the embedded backend (cast once, not per action).
    /// The backend's batch read, if it has one (``BatchQueueReading``).
    let batchReader: (any BatchQueueReading)?
    let configuration: TaskQueueBroker.Configuration
    let time: BrokerTime
    let claimFilter: @Sendable (String) -> Bool
    let registry: ClaimRegistry
    let brokerID: UInt64
    let initialQueues: [String]
    /// More stored queues than `initialQueues` come after this name: listed a page at a time.
    let listedThrough: String?
    /// How many queue names a listing returns at most.
    static var queueNamesPerPage: Int { 1024 }
    /// How many entries of the schedule one read returns.
    static var scheduledPerPage: Int { 1024 }
    let mailbox = Mailbox<BrokerStateMachine.Input>()
    let committer: any OutcomeCommitter
    let handlers = HandlerTasks()
    let events = EventBroadcaster<TaskBrokerEvent>()
    let finished = Latch()
    let currentView = Mutex(BrokerView())
    /// Whether the action type has a `sort(_:)` of its own (`nil`: no action decoded yet): its
    /// queues are then read whole, since any stored action may run first.
    let ordersBySort = Mutex<Bool?>(nil)
    let logger: Logger
    let metrics: BrokerMetrics
    /// Runs the plain parallel actions of the broker's scope (a backend that stores them, and
    /// `maxConcurrentParallelActions` above 0).
    let lane: ParallelLane?
    /// Decodes plain parallel actions' payloads (``makeParallelRun(_:)``): one for the broker's
    /// lifetime rather than one per action. Decoding with it from several tasks at once is safe
    /// (each decode has its own state; the options are behind the decoder's lock).
    let payloadDecoder = JSONDecoder()

    init(
        name: String, brokerID: UInt64, handler: Handler, storage: any TaskStorage, registry: ClaimRegistry,
        configuration: TaskQueueBroker.Configuration, time: BrokerTime, initialQueues: [String],
        listedThrough: String?,
        claimFilter: @escaping @Sendable (String) -> Bool,
        parallelScope: (@Sendable () async throws -> TaskParallelScope)? = nil
    ) {
        self.name = name
        self.owner = ProcessIdentity.owner(brokerName: name)
        self.brokerID = brokerID
        if let asyncHandler = handler as? any AsyncTaskQueueHandler<Handler.Action> {
            handle = { action, context in await asyncHandler.handle(action, context: context) }
        } else {
            handle = { action, _ in await handler.handleThroughCallback(action) }
        }
        self.storage = storage
        self.batchReader = storage as? any BatchQueueReading
        self.registry = registry
        self.configuration = configuration
        self.time = time
        self.initialQueues = initialQueues
        self.listedThrough = listedThrough
        self.claimFilter = claimFilter
        var logger = configuration.logger
        logger[metadataKey: "broker"] = "\(name)"
        self.logger = logger
        self.metrics = BrokerMetrics(broker: name, factory: configuration.metricsFactory)
        if let parallelStorage = storage as? any ParallelTaskStorage, let parallelScope, configuration.maxConcurrentParallelActions > 0 {
            let events = self.events
            let metrics = self.metrics
            let brokerLogger = logger
            lane = ParallelLane(
                storage: parallelStorage, scope: parallelScope, owner: owner, capacity: configuration.maxConcurrentParallelActions,
                leaseDuration: storage.leaseDuration ?? configuration.leaseDuration, time: time,
                backoff: configuration.storageRetryBackoff, handlers: handlers,
                emit: { event in Self.reportParallel(event, events: events, metrics: metrics, logger: brokerLogger) }, logger: logger
            )
        } else {
            lane = nil
        }
        if let blocking = storage as? any BlockingOutcomeStore {
            committer = ThreadOutcomeCommitter(storage: blocking, mailbox: mailbox)
        } else {
            committer = AsyncOutcomeCommitter(
                storage: storage, owner: owner, leaseDuration: storage.leaseDuration ?? configuration.leaseDuration, mailbox: mailbox,
                elapsed: time.elapsed
            )
        }
    }

    /// The lease of a claim on a shared backend: the backend's own, or the configured one.
    var leaseDuration: Duration {
        storage.leaseDuration ?? configuration.leaseDuration
    }

    /// How old a claim may be for its head to start on it (shared backends): a quarter of the
    /// lease. Checked when the claim's answer is handled (`BrokerStateMachine.Configuration`) and
    /// again when the handler starts (``makeRun(_:next:)``).
    var claimLifetime: Duration {
        leaseDuration / 4
    }

    func accepts(_ queueName: String) -> Bool {
        claimFilter(queueName)
    }

    func stop() {
        mailbox.post(.shutdown)
        lane?.stop()
    }

    func abandon() {
        mailbox.post(.abandon)
        lane?.abandon()
    }

    func view() -> BrokerView {
        var view = currentView.withLock { $0 }
        view.parallelClaims = lane?.claimsSent.load(ordering: .relaxed) ?? 0
        return view
    }

    // MARK: - The driver

    func run() async {
        let registry = self.registry
        let brokerID = self.brokerID
        let filter = claimFilter
        var machine = BrokerStateMachine(
            configuration: .init(
                maxConcurrentQueues: configuration.maxConcurrentQueues,
                claimsHeads: !(storage is any UnclaimedHeads),
                storageBackoff: configuration.storageRetryBackoff,
                nextHeadLifetime: leaseDuration / 12,
                claimLifetime: claimLifetime,
                sharingLifetime: leaseDuration,
                askInterval: leaseDuration / 3,
                readsAheadBelow: max(1, configuration.readAhead) / 2,
                wallClockAnchor: time.anchor,
                rateLimits: configuration.rateLimits,
                renewalInterval: storage.isShared ? leaseDuration / 3 : nil,
                renewalRetry: leaseDuration / 12
            ),
            accepts: { queueName in
                guard filter(queueName) else { return .refused }
                return registry.own(queueName, by: brokerID) ? .runs : .ownedElsewhere
            },
            forgets: { queueNames in registry.disown(queueNames, by: brokerID) }
        )
        var timers: [UInt64: BrokerTimer] = [:]
        var releases: [Task<Void, Never>] = []
        await withDiscardingTaskGroup { group in
            group.addTask { await self.committer.run() }
            if let lane {
                group.addTask { await lane.run { claim in self.makeParallelRun(claim) } }
            }
            machine.now = time.elapsed()
            var done = perform(
                machine.handle([.start(readingOrder(initialQueues), listedThrough: listedThrough)]), timers: &timers, releases: &releases, group: &group
            )
            while !done, let posted = await mailbox.next() {
                // Changes heard on the committing thread are decoded here, on the broker's task.
                let inputs = decodingCommitted(posted)
                // A timer that fired is done: drop it here (the machine only forgets its purpose).
                // Kept, every timed retry cost a timer for the life of the broker: ~3 MB a minute in
                // the soak's worker.
                for case .timerFired(let token) in inputs {
                    timers.removeValue(forKey: token)
                }
                machine.now = time.elapsed()
                done = perform(machine.handle(inputs), timers: &timers, releases: &releases, group: &group)
                let count = timers.count
                let machineCount = machine.timers.count
                let pauseCount = machine.pauseTimers
                let renewalCount = if case .scheduled = machine.renewal { 1 } else { 0 }
                let queueCount = machine.queues.count
                currentView.withLock {
                    $0.timers = count
                    $0.machineTimers = machineCount
                    $0.pauseTimers = pauseCount
                    $0.renewalTimers = renewalCount
                    $0.queues = queueCount
                }
            }
            // Stopped: nothing is queued for the committer any more (or it was drained after a
            // timeout). Loads, claims and timers still under way are cancelled; the group waits
            // for every child, the committer's thread included, before `run()` returns.
            committer.drain()
            for timer in timers.values {
                timer.cancel()
            }
            await Self.finish(releases, within: .seconds(2))
            // The plain parallel actions' handlers finish too, and their outcomes are stored.
            await lane?.finished.wait()
            group.cancelAll()
        }
        mailbox.close()
        currentView.withLock { $0 = BrokerView() }
        logger.debug("broker stopped")
        events.yield(.stopped)
        events.finish()
        finished.open()
    }

    /// Carries out the machine's outputs; `true` once the broker has stopped.
    private func perform(
        _ outputs: [BrokerStateMachine.Output], timers: inout [UInt64: BrokerTimer], releases: inout [Task<Void, Never>],
        group: inout DiscardingTaskGroup
    ) -> Bool {
        var done = false
        for output in outputs {
            switch output {
            case .load(let queueNames, let claimBudget):
                group.addTask { await self.load(queueNames, claimBudget: claimBudget) }
            case .readAhead(let requests):
                group.addTask { await self.readAhead(requests) }
            case .listQueues(let name):
                group.addTask { await self.listQueues(after: name) }
            case .findScheduled(let cursor, let through):
                group.addTask { await self.findScheduled(after: cursor, through: through) }
            case .claim(let heads):
                group.addTask { await self.claim(heads) }
            case .run(let entries, let next, let epochs):
                let runs = entries.indices.compactMap { makeRun(entries[$0], next: next[$0], epoch: epochs[$0]) }
                group.addTask { self.launch(runs) }
            case .release(let leases):
                // Not a child of the group, which is cancelled once the broker has stopped.
                releases.append(Task { await self.release(leases) })
            case .releaseAgain(let leases):
                group.addTask { await self.release(leases) }
            case .announceSpareCapacity(let room):
                group.addTask { await self.announceSpareCapacity(room: room) }
            case .store(let outcomes):
                let now = time.now()
                committer.submit(outcomes.map { $0.stamped(at: now) })
            case .renew(let leases):
                group.addTask { await self.renew(leases) }
            case .startTimer(let token, let delay):
                let timer = BrokerTimer()
                timers[token] = timer
                // The deadline is fixed now, not when the child task starts sleeping.
                let sleepUntilElapsed = time.sleepUntilElapsed
                let sleep: @Sendable () async throws -> Void
                switch delay {
                case .after(let after):
                    let deadline = time.elapsed() + after
                    sleep = { try await sleepUntilElapsed(deadline) }
                case .until(let date):
                    let deadline = time.elapsed() + .timer(until: date, now: time.now())
                    sleep = { try await sleepUntilElapsed(deadline) }
                case .realTime(let after):
                    // On the real clock, whatever clock the broker was given: a lease expires on
                    // the database server's clock.
                    let deadline = ContinuousClock.now + after
                    sleep = { try await Task.sleep(until: deadline, clock: .continuous) }
                }
                let mailbox = self.mailbox
                group.addTask {
                    if await timer.sleep(using: sleep) {
                        mailbox.post(.timerFired(token))
                    }
                }
            case .cancelTimer(let token):
                timers.removeValue(forKey: token)?.cancel()
            case .emit(let event):
                report(event)
            case .acquireStarts(let key, let limit, let count):
                group.addTask { await self.acquireStarts(key, limit: limit, count: count) }
            case .releaseStarts(let key, let at, let count):
                group.addTask { await self.releaseStarts(key, at: at, count: count) }
            case .cancelHandlers:
                logger.warning("shutdown timeout passed: cancelling running handlers; their actions stay stored and run again at the next start")
                handlers.cancelAll()
            case .drainCommitter:
                committer.drain()
            case .finish:
                done = true
            }
        }
        return done
    }
}
