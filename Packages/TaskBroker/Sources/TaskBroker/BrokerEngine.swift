import Foundation
import Logging
import Metrics
import Synchronization

/// The broker's time: an injected `Clock` for waiting, anchored to an injected wall-clock
/// reading so that stored retry deadlines (wall-clock dates) turn into durations on the clock.
struct BrokerTime: Sendable {
    let elapsed: @Sendable () -> Duration
    let sleep: @Sendable (Duration) async throws -> Void
    let anchor: Date

    init<C: Clock<Duration>>(clock: C, wallClock: @Sendable () -> Date) {
        let start = clock.now
        self.anchor = wallClock()
        self.elapsed = { start.duration(to: clock.now) }
        self.sleep = { duration in try await clock.sleep(for: duration) }
    }

    /// The current wall-clock time: the anchor plus the time elapsed on the clock.
    func now() -> Date {
        anchor.addingTimeInterval(elapsed().timeInterval)
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    init(timeInterval: TimeInterval) {
        self = .nanoseconds(Int64((timeInterval * 1e9).rounded()))
    }
}

/// A handler's outcome on its way to the database.
struct BrokerFinished: Sendable {
    let task: StoredTask
    let result: TaskResult
    let pause: TaskPause?

    var outcome: TaskOutcome {
        result == .success ? .completed(task) : .failed(task, pause: pause)
    }
}

struct BrokerActionID: Hashable {
    let collection: String
    let key: String

    init(_ task: StoredTask) {
        collection = task.collection
        key = task.key
    }
}

/// The part of a broker that does not depend on the handler's type.
protocol BrokerEngineProtocol: Sendable {
    var name: String { get }
    var events: EventBroadcaster { get }
    var finished: Latch { get }
    func stop(abandon: Bool)
    func inFlight() -> [String: String]
    func accepts(_ queueName: String) -> Bool
}

/// Schedules a broker's queues. One driver task owns all scheduling state; handlers, timers
/// and database changes talk to it through a ``Mailbox``.
final class BrokerEngine<Handler: TaskQueueHandler>: BrokerEngineProtocol {
    typealias Action = Handler.Action
    typealias Finished = BrokerFinished
    typealias ActionID = BrokerActionID

    enum Signal: Sendable {
        case changes([TaskChange])
        case committed([Finished], succeeded: Bool)
        case loaded(queueName: String, entries: [Entry]?)
        case timer(queueName: String, token: UInt64)
        case stop
        case abandon
    }

    struct Entry: Sendable {
        var task: StoredTask
        var action: Action?
        var since: Duration
    }

    struct QueueState {
        /// Runnable actions in run order, from `head` on.
        var entries: [Entry] = []
        var head = 0
        /// The sticky head: an action that failed runs again before anything else.
        var held: Entry?
        var inFlight: StoredTask?
        var timer: (token: UInt64, task: Task<Void, Never>)?

        var isEmpty: Bool { held == nil && head == entries.count }
        var count: Int { entries.count - head + (held == nil ? 0 : 1) }
    }

    let name: String
    let owner: String
    let brokerID: UInt64
    let handler: Handler
    let storage: any TaskStorage
    let registry: ClaimRegistry
    let configuration: TaskQueueBroker.Configuration
    let time: BrokerTime
    let claimFilter: @Sendable (String) -> Bool
    let mailbox = Mailbox<Signal>()
    let committer = Mailbox<Finished>()
    private let committerQueue = BlockingQueue<Finished>()
    let events = EventBroadcaster()
    let finished = Latch()
    private let inFlightView = Mutex<[String: String]>([:])
    private let logger: Logger
    private let handled: Counter
    private let failed: Counter
    private let retried: Counter
    private let queueWait: Metrics.Timer
    private let handleDuration: Metrics.Timer

    init(
        name: String, brokerID: UInt64, handler: Handler, storage: any TaskStorage, registry: ClaimRegistry,
        configuration: TaskQueueBroker.Configuration, time: BrokerTime,
        claimFilter: @escaping @Sendable (String) -> Bool
    ) {
        self.name = name
        self.owner = "\(name)#\(brokerID)"
        self.brokerID = brokerID
        self.handler = handler
        self.storage = storage
        self.registry = registry
        self.configuration = configuration
        self.time = time
        self.claimFilter = claimFilter
        var logger = configuration.logger
        logger[metadataKey: "broker"] = "\(name)"
        self.logger = logger
        let dimensions = [("broker", name)]
        handled = Counter(label: "taskbroker_actions_handled", dimensions: dimensions)
        failed = Counter(label: "taskbroker_actions_failed", dimensions: dimensions)
        retried = Counter(label: "taskbroker_actions_retried", dimensions: dimensions)
        queueWait = Metrics.Timer(label: "taskbroker_queue_wait", dimensions: dimensions)
        handleDuration = Metrics.Timer(label: "taskbroker_handle_duration", dimensions: dimensions)
    }

    func accepts(_ queueName: String) -> Bool {
        claimFilter(queueName)
    }

    func stop(abandon: Bool) {
        mailbox.post(abandon ? .abandon : .stop)
    }

    func inFlight() -> [String: String] {
        inFlightView.withLock { $0 }
    }

    // MARK: - The driver

    private struct Driver {
        var queues: [String: QueueState] = [:]
        var ignored: Set<String> = []
        var ready: [String] = []
        var readySet: Set<String> = []
        /// Queues that have an action reserved, claimed, running or being committed.
        var running = 0
        var stopping = false
        /// Queues being read at startup, and those changed while they were read.
        var loading: Set<String> = []
        var dirtyWhileLoading: Set<String> = []

        var isIdle: Bool { running == 0 }
        var nextTimerToken: UInt64 = 0
        /// Which queue holds each action this broker knows of.
        var locations: [ActionID: String] = [:]
        let decoder = JSONDecoder()
    }

    /// Runs until the broker stops. Loads the stored queues first: stored actions start without
    /// any new write.
    ///
    /// The driver never waits for a commit: handlers hand their outcomes straight to a committer
    /// (a thread of its own for SQLite, a task otherwise) that stores everything that arrived
    /// while its previous commit ran in one transaction and reports back through the mailbox. A
    /// queue's next action starts only after its previous outcome is committed.
    func run(initialQueues: [String]) async {
        var driver = Driver()
        let committerTask: Task<Void, Never>?
        if let sqlite = storage as? SQLiteTaskStorage {
            // The embedded backend commits on a thread of its own with GRDB's blocking API: a
            // commit then costs no executor hops, which is most of its latency on a busy machine.
            committerTask = nil
            startCommitterThread(sqlite)
        } else {
            committerTask = Task { [committer, storage, owner, mailbox, logger] in
                while let batch = await committer.next() {
                    var succeeded = true
                    do {
                        try await storage.finish(batch.map(\.outcome), owner: owner)
                    } catch {
                        logger.error("could not store \(batch.count) outcome(s); their queues wait for restartQueues: \(error)")
                        succeeded = false
                    }
                    mailbox.post(.committed(batch, succeeded: succeeded))
                }
            }
        }
        defer { committerTask?.cancel() }
        startLoading(initialQueues, in: &driver)
        loop: while let signals = await mailbox.next() {
            for signal in signals {
                switch signal {
                case .changes(let batch):
                    await apply(batch, to: &driver)
                case .loaded(let queueName, let entries):
                    await loaded(queueName, entries: entries, in: &driver)
                case .committed(let batch, let succeeded):
                    committed(batch, succeeded: succeeded, in: &driver)
                case .timer(let queueName, let token):
                    fireTimer(queueName, token: token, in: &driver)
                case .stop:
                    driver.stopping = true
                case .abandon:
                    break loop
                }
            }
            if driver.stopping && driver.isIdle { break }
            await launchClaim(&driver)
        }
        mailbox.close()
        committer.close()
        committerQueue.close()
        for state in driver.queues.values {
            state.timer?.task.cancel()
        }
        inFlightView.withLock { $0 = [:] }
        logger.debug("broker stopped")
        events.yield(.stopped)
        events.finish()
        finished.open()
    }

    /// Reads and decodes a queue's stored actions, sorted in run order (the held action first
    /// if one is paused). Runs off the driver at startup, so both cores work.
    static func read(_ queueName: String, from storage: any TaskStorage, since: Duration) async throws -> [Entry] {
        let decoder = JSONDecoder()
        var held: Entry?
        var entries: [Entry] = []
        for task in try await storage.tasks(inQueue: queueName) {
            let entry = Entry(task: task, action: try? decoder.decode(Action.self, from: task.payload), since: since)
            if task.pause != nil && held == nil {
                held = entry
            } else {
                entries.append(entry)
            }
        }
        // `sort` is a stable merge sort in the standard library: equal actions keep enqueue order.
        entries.sort(by: runsBefore)
        return (held.map { [$0] } ?? []) + entries
    }

    /// Loads the queues stored at startup in a background task; each arrives as `.loaded`.
    private func startLoading(_ queueNames: [String], in driver: inout Driver) {
        guard !queueNames.isEmpty else { return }
        driver.loading.formUnion(queueNames)
        let storage = self.storage
        let mailbox = self.mailbox
        let since = time.elapsed()
        Task {
            for queueName in queueNames {
                let entries = try? await Self.read(queueName, from: storage, since: since)
                mailbox.post(.loaded(queueName: queueName, entries: entries))
            }
        }
    }

    private func loaded(_ queueName: String, entries: [Entry]?, in driver: inout Driver) async {
        driver.loading.remove(queueName)
        if driver.dirtyWhileLoading.remove(queueName) != nil || entries == nil {
            // Changed while it loaded (or the read failed): read it again, now.
            await load(queueName, into: &driver)
        } else if let entries {
            install(queueName, entries, in: &driver)
        }
    }

    private func load(_ queueName: String, into driver: inout Driver) async {
        guard driver.queues[queueName] == nil, !driver.ignored.contains(queueName) else { return }
        guard claimFilter(queueName), registry.own(queueName, by: brokerID) else {
            driver.ignored.insert(queueName)
            return
        }
        do {
            install(queueName, try await Self.read(queueName, from: storage, since: time.elapsed()), in: &driver)
        } catch {
            logger.error("could not load queue \(queueName): \(error)")
            driver.queues[queueName] = QueueState()
        }
    }

    private func install(_ queueName: String, _ entries: [Entry], in driver: inout Driver) {
        var state = QueueState()
        for entry in entries {
            let id = ActionID(entry.task)
            if let other = driver.locations[id], other != queueName {
                removeEntry(id, revision: nil, in: &driver)
            }
            driver.locations[id] = queueName
        }
        if let first = entries.first, first.task.pause != nil {
            state.held = first
            state.entries = Array(entries.dropFirst())
        } else {
            state.entries = entries
        }
        driver.queues[queueName] = state
        if let held = state.held, case .until(let date) = held.task.pause {
            startTimer(queueName, until: date, in: &driver)
        }
        markReady(queueName, in: &driver)
    }

    static func runsBefore(_ lhs: Entry, _ rhs: Entry) -> Bool {
        if let left = lhs.action, let right = rhs.action {
            switch left.sort(right) {
            case .orderedAscending: return true
            case .orderedDescending: return false
            case .orderedSame: break
            }
        }
        return lhs.task.position < rhs.task.position
    }

    private func markReady(_ queueName: String, in driver: inout Driver) {
        guard let state = driver.queues[queueName], state.inFlight == nil, !state.isEmpty,
              !driver.readySet.contains(queueName) else { return }
        if let held = state.held, held.task.pause != nil { return }
        driver.ready.append(queueName)
        driver.readySet.insert(queueName)
    }

    private func startTimer(_ queueName: String, until date: Date, in driver: inout Driver) {
        driver.queues[queueName]?.timer?.task.cancel()
        driver.nextTimerToken += 1
        let token = driver.nextTimerToken
        let delay = Duration(timeInterval: max(0, date.timeIntervalSince(time.now())))
        let sleep = time.sleep
        let mailbox = self.mailbox
        let task = Task {
            do {
                try await sleep(delay)
                mailbox.post(.timer(queueName: queueName, token: token))
            } catch {
                // Cancelled: the queue was resumed, re-saved or the broker stopped.
            }
        }
        driver.queues[queueName]?.timer = (token, task)
    }

    private func fireTimer(_ queueName: String, token: UInt64, in driver: inout Driver) {
        guard var state = driver.queues[queueName], state.timer?.token == token else { return }
        state.timer = nil
        state.held?.task.pause = nil
        driver.queues[queueName] = state
        events.yield(.resumed(queueName: queueName))
        markReady(queueName, in: &driver)
    }

    private func clearPause(_ queueName: String, in driver: inout Driver) {
        driver.queues[queueName]?.timer?.task.cancel()
        driver.queues[queueName]?.timer = nil
        if driver.queues[queueName]?.held?.task.pause != nil {
            driver.queues[queueName]?.held?.task.pause = nil
            events.yield(.resumed(queueName: queueName))
        }
        markReady(queueName, in: &driver)
    }

    // MARK: Changes made through the database

    private func apply(_ changes: [TaskChange], to driver: inout Driver) async {
        for change in changes {
            let touched: [String]
            switch change {
            case .saved(let task), .deleted(let task): touched = [task.queueName]
            case .resumed(let queueNames, _): touched = queueNames
            case .purged(let queueName): touched = [queueName]
            }
            let stale = touched.filter { driver.loading.contains($0) }
            driver.dirtyWhileLoading.formUnion(stale)
            if !stale.isEmpty, case .saved(let task) = change {
                // Forget an older version elsewhere; the reload of its new queue has it.
                removeEntry(ActionID(task), revision: nil, in: &driver)
                continue
            }
            if !stale.isEmpty, case .deleted = change { continue }
            if !stale.isEmpty, case .purged = change { continue }
            switch change {
            case .saved(let task):
                removeEntry(ActionID(task), revision: nil, in: &driver)
                if driver.queues[task.queueName] == nil {
                    // A queue this broker has not seen yet: load it (the load includes this save).
                    await load(task.queueName, into: &driver)
                    continue
                }
                guard var state = driver.queues.removeValue(forKey: task.queueName) else { continue }
                let entry = Entry(
                    task: task, action: try? driver.decoder.decode(Action.self, from: task.payload), since: time.elapsed()
                )
                // Binary search for the first entry the new one runs before; equal ones stay in front.
                var low = state.head
                var high = state.entries.count
                while low < high {
                    let middle = (low + high) / 2
                    if Self.runsBefore(entry, state.entries[middle]) { high = middle } else { low = middle + 1 }
                }
                state.entries.insert(entry, at: low)
                driver.queues[task.queueName] = state
                markReady(task.queueName, in: &driver)
                driver.locations[ActionID(task)] = task.queueName
                markReady(task.queueName, in: &driver)
            case .deleted(let task):
                removeEntry(ActionID(task), revision: task.revision, in: &driver)
            case .resumed(let queueNames, _):
                for queueName in queueNames where driver.queues[queueName] != nil {
                    clearPause(queueName, in: &driver)
                }
            case .purged(let queueName):
                guard var state = driver.queues[queueName] else { continue }
                state.timer?.task.cancel()
                state.timer = nil
                state.entries = []
                state.head = 0
                state.held = nil
                driver.queues[queueName] = state
                driver.locations = driver.locations.filter { $0.value != queueName }
            }
        }
    }

    /// Removes the stored version of an action (any version when `revision` is `nil`) from
    /// whichever queue holds it.
    private func removeEntry(_ id: ActionID, revision: Int64?, in driver: inout Driver) {
        guard let queueName = driver.locations[id], var state = driver.queues.removeValue(forKey: queueName) else { return }
        defer { driver.queues[queueName] = state }
        if let held = state.held, ActionID(held.task) == id, revision == nil || held.task.revision == revision {
            driver.locations[id] = nil
            state.held = nil
            state.timer?.task.cancel()
            state.timer = nil
            if state.inFlight == nil, !state.isEmpty, !driver.readySet.contains(queueName) {
                driver.ready.append(queueName)
                driver.readySet.insert(queueName)
            }
            return
        }
        if let index = state.entries[state.head...].firstIndex(where: {
            ActionID($0.task) == id && (revision == nil || $0.task.revision == revision)
        }) {
            driver.locations[id] = nil
            state.entries.remove(at: index)
        }
    }

    // MARK: Finished actions

    private func isHeld(_ task: StoredTask, in driver: Driver) -> Bool {
        guard let held = driver.queues[task.queueName]?.held?.task else { return false }
        return held.key == task.key && held.collection == task.collection && held.revision == task.revision
    }

    private func discard(_ task: StoredTask, in driver: inout Driver) {
        finishRunning(task.queueName, in: &driver)
        events.yield(.discarded(queueName: task.queueName, key: task.key, collection: task.collection))
        markReady(task.queueName, in: &driver)
    }

    private func committed(_ batch: [Finished], succeeded: Bool, in driver: inout Driver) {
        for finished in batch {
            let task = finished.task
            let queueName = task.queueName
            guard isHeld(task, in: driver) else {
                // Deleted or replaced while its outcome was being stored (the store was a no-op).
                discard(task, in: &driver)
                continue
            }
            finishRunning(queueName, in: &driver)
            guard var state = driver.queues.removeValue(forKey: queueName), var held = state.held else { continue }
            defer {
                driver.queues[queueName] = state
                markReady(queueName, in: &driver)
            }
            if !succeeded {
                // Unknown what is on disk: keep the action first and wait for a restart.
                held.task.pause = .untilRestart
                state.held = held
                continue
            }
            switch finished.result {
            case .success:
                state.held = nil
                driver.locations[ActionID(task)] = nil
                handled.increment()
                events.yield(.succeeded(queueName: queueName, key: task.key, collection: task.collection))
            case .retry, .waitForRestart:
                held.task.attempts += 1
                held.task.pause = finished.pause
                state.held = held
                failed.increment()
                if case .retry = finished.result { retried.increment() }
                logger.debug("action \(task.collection)/\(task.key) of \(queueName) failed: \(finished.result)")
                events.yield(.failed(queueName: queueName, key: task.key, collection: task.collection, result: finished.result))
                if case .until(let date)? = finished.pause {
                    driver.queues[queueName] = state
                    startTimer(queueName, until: date, in: &driver)
                    state = driver.queues.removeValue(forKey: queueName) ?? state
                }
            }
        }
    }

    private func finishRunning(_ queueName: String, in driver: inout Driver) {
        driver.queues[queueName]?.inFlight = nil
        driver.running -= 1
        _ = inFlightView.withLock { $0.removeValue(forKey: queueName) }
    }

    // MARK: Starting actions

    /// Reserves the heads of ready queues (up to the cap, longest-waiting queue first), claims
    /// them and starts those granted.
    private func launchClaim(_ driver: inout Driver) async {
        guard !driver.stopping else { return }
        var picks: [Entry] = []
        while driver.running < configuration.maxConcurrentQueues, !driver.ready.isEmpty {
            let queueName = driver.ready.removeFirst()
            driver.readySet.remove(queueName)
            guard var state = driver.queues.removeValue(forKey: queueName) else { continue }
            defer { driver.queues[queueName] = state }
            guard state.inFlight == nil else { continue }
            if state.held == nil, state.head < state.entries.count {
                // Move the head out of the list; it stays the sticky head until it succeeds.
                state.held = state.entries[state.head]
                state.head += 1
                if state.head > 1024, state.head * 2 > state.entries.count {
                    state.entries.removeFirst(state.head)
                    state.head = 0
                }
            }
            guard let held = state.held, held.task.pause == nil else { continue }
            state.inFlight = held.task
            driver.running += 1
            picks.append(held)
        }
        guard !picks.isEmpty else { return }
        var granted: [Bool]?
        do {
            granted = try await storage.claim(picks.map(\.task), owner: owner, leaseDuration: configuration.leaseDuration)
        } catch {
            logger.error("could not claim \(picks.count) action(s); their queues wait for restartQueues: \(error)")
        }
        claimed(picks, granted: granted, in: &driver)
    }

    private func claimed(_ picks: [Entry], granted: [Bool]?, in driver: inout Driver) {
        for (index, pick) in picks.enumerated() {
            let queueName = pick.task.queueName
            let isCurrent = isHeld(pick.task, in: driver)
            guard let granted, granted[index], isCurrent, !driver.stopping else {
                // Not started: give the reservation back.
                driver.queues[queueName]?.inFlight = nil
                driver.running -= 1
                if granted == nil, isCurrent {
                    driver.queues[queueName]?.held?.task.pause = .untilRestart
                } else if granted?[index] == false, isCurrent {
                    // Gone or changed behind our back (another process): drop it, look again.
                    driver.queues[queueName]?.held = nil
                    driver.locations[ActionID(pick.task)] = nil
                }
                markReady(queueName, in: &driver)
                continue
            }
            start(pick)
        }
    }

    private func submit(_ finished: Finished) {
        if storage is SQLiteTaskStorage {
            committerQueue.push(finished)
        } else {
            committer.post(finished)
        }
    }

    private func startCommitterThread(_ sqlite: SQLiteTaskStorage) {
        let queue = committerQueue
        let mailbox = self.mailbox
        let logger = self.logger
        Thread.detachNewThread {
            while let batch = queue.popAll() {
                var succeeded = true
                do {
                    try sqlite.finishBlocking(batch.map(\.outcome))
                } catch {
                    logger.error("could not store \(batch.count) outcome(s); their queues wait for restartQueues: \(error)")
                    succeeded = false
                }
                mailbox.post(.committed(batch, succeeded: succeeded))
            }
        }
    }

    private func start(_ entry: Entry) {
        let task = entry.task
        inFlightView.withLock { $0[task.queueName] = task.key }
        let now = time.elapsed()
        queueWait.recordNanoseconds(max(0, (now - entry.since).nanoseconds))
        events.yield(.started(queueName: task.queueName, key: task.key, collection: task.collection, attempt: task.attempts + 1))
        guard let action = entry.action else {
            logger.error("action \(task.collection)/\(task.key) of \(task.queueName) does not decode as \(Action.self); pausing its queue")
            events.yield(.undecodable(queueName: task.queueName, key: task.key, collection: task.collection))
            submit(Finished(task: task, result: .waitForRestart, pause: .untilRestart))
            return
        }
        let handler = self.handler
        let time = self.time
        let handleDuration = self.handleDuration
        let context = TaskContext(queueName: task.queueName, key: task.key, collection: task.collection, attempt: task.attempts + 1)
        Task { [self] in
            let result = await handler.handle(action, context: context)
            handleDuration.recordNanoseconds(max(0, (time.elapsed() - now).nanoseconds))
            let pause: TaskPause?
            switch result {
            case .success: pause = nil
            case .retry(let after): pause = after > .zero ? .until(time.now().addingTimeInterval(after.timeInterval)) : nil
            case .waitForRestart: pause = .untilRestart
            }
            // Straight to the committer: outcomes that arrive while a commit runs share the next one.
            submit(Finished(task: task, result: result, pause: pause))
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        components.seconds &* 1_000_000_000 &+ components.attoseconds / 1_000_000_000
    }
}

/// Fans broker events out to every ``TaskQueueBroker/events`` stream.
final class EventBroadcaster: Sendable {
    private struct State {
        var subscribers: [UInt64: AsyncStream<TaskBrokerEvent>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state = Mutex(State())
    /// How many streams are open: events are not even built into a list while nobody listens.
    private let subscriberCount = Atomic<Int>(0)

    func stream() -> AsyncStream<TaskBrokerEvent> {
        let (stream, continuation) = AsyncStream<TaskBrokerEvent>.makeStream()
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            subscriberCount.add(1, ordering: .relaxed)
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            if state.withLock({ $0.subscribers.removeValue(forKey: id) }) != nil {
                subscriberCount.subtract(1, ordering: .relaxed)
            }
        }
        return stream
    }

    func yield(_ event: TaskBrokerEvent) {
        guard subscriberCount.load(ordering: .relaxed) > 0 else { return }
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers {
            subscriber.yield(event)
        }
    }

    func finish() {
        let subscribers = state.withLock { state -> [AsyncStream<TaskBrokerEvent>.Continuation] in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        subscribers.forEach { $0.finish() }
    }
}

