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

    enum Signal: Sendable {
        case changes([TaskChange])
        case finished(StoredTask, TaskResult, started: Duration)
        case timer(queueName: String, token: UInt64)
        case stop
        case abandon
    }

    struct ActionID: Hashable {
        let collection: String
        let key: String

        init(_ task: StoredTask) {
            collection = task.collection
            key = task.key
        }
    }

    struct Entry {
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
        var running = 0
        var stopping = false
        var nextTimerToken: UInt64 = 0
        var storageStalled: Set<String> = []
        /// Which queue holds each action this broker knows of.
        var locations: [ActionID: String] = [:]
    }

    /// Runs until the broker stops. Loads the stored queues first: stored actions start without
    /// any new write.
    func run(initialQueues: [String]) async {
        var driver = Driver()
        for queueName in initialQueues {
            await load(queueName, into: &driver)
        }
        await schedule(&driver)
        loop: while let signals = await mailbox.next() {
            var outcomes: [(StoredTask, TaskResult, Duration)] = []
            var changes: [TaskChange] = []
            for signal in signals {
                switch signal {
                case .changes(let batch):
                    // Apply finished actions first when they precede a change in the mailbox.
                    if !outcomes.isEmpty {
                        await apply(outcomes, to: &driver)
                        outcomes = []
                    }
                    changes += batch
                    await apply(changes, to: &driver)
                    changes = []
                case .finished(let task, let result, let started):
                    outcomes.append((task, result, started))
                case .timer(let queueName, let token):
                    fireTimer(queueName, token: token, in: &driver)
                case .stop:
                    driver.stopping = true
                case .abandon:
                    break loop
                }
            }
            if !outcomes.isEmpty {
                await apply(outcomes, to: &driver)
            }
            if driver.stopping && driver.running == 0 { break }
            await schedule(&driver)
        }
        mailbox.close()
        for state in driver.queues.values {
            state.timer?.task.cancel()
        }
        inFlightView.withLock { $0 = [:] }
        logger.debug("broker stopped")
        events.yield(.stopped)
        events.finish()
        finished.open()
    }

    private func load(_ queueName: String, into driver: inout Driver) async {
        guard driver.queues[queueName] == nil, !driver.ignored.contains(queueName) else { return }
        guard claimFilter(queueName), registry.own(queueName, by: brokerID) else {
            driver.ignored.insert(queueName)
            return
        }
        let tasks: [StoredTask]
        do {
            tasks = try await storage.tasks(inQueue: queueName)
        } catch {
            logger.error("could not load queue \(queueName): \(error)")
            driver.queues[queueName] = QueueState()
            return
        }
        var state = QueueState()
        let since = time.elapsed()
        let decoder = JSONDecoder()
        var entries: [Entry] = []
        for task in tasks {
            if let other = driver.locations[ActionID(task)], other != queueName {
                removeEntry(ActionID(task), revision: nil, in: &driver)
            }
            driver.locations[ActionID(task)] = queueName
            let entry = Entry(task: task, action: try? decoder.decode(Action.self, from: task.payload), since: since)
            if task.pause != nil && state.held == nil {
                state.held = entry
            } else {
                entries.append(entry)
            }
        }
        // `sort` is a stable merge sort in the standard library: equal actions keep enqueue order.
        entries.sort(by: Self.runsBefore)
        state.entries = entries
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
            switch change {
            case .saved(let task):
                removeEntry(ActionID(task), revision: nil, in: &driver)
                if driver.queues[task.queueName] == nil {
                    // A queue this broker has not seen yet: load it (the load includes this save).
                    await load(task.queueName, into: &driver)
                    continue
                }
                guard var state = driver.queues[task.queueName] else { continue }
                let entry = Entry(
                    task: task, action: try? JSONDecoder().decode(Action.self, from: task.payload), since: time.elapsed()
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
                driver.locations[ActionID(task)] = task.queueName
                markReady(task.queueName, in: &driver)
            case .deleted(let task):
                removeEntry(ActionID(task), revision: task.revision, in: &driver)
            case .resumed(let queueNames, _):
                for queueName in queueNames where driver.queues[queueName] != nil {
                    driver.storageStalled.remove(queueName)
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
        guard let queueName = driver.locations[id], var state = driver.queues[queueName] else { return }
        if let held = state.held, ActionID(held.task) == id, revision == nil || held.task.revision == revision {
            driver.locations[id] = nil
            state.held = nil
            state.timer?.task.cancel()
            state.timer = nil
            driver.queues[queueName] = state
            markReady(queueName, in: &driver)
            return
        }
        if let index = state.entries[state.head...].firstIndex(where: {
            ActionID($0.task) == id && (revision == nil || $0.task.revision == revision)
        }) {
            driver.locations[id] = nil
            state.entries.remove(at: index)
            driver.queues[queueName] = state
        }
    }

    // MARK: Finished actions

    private func apply(_ outcomes: [(StoredTask, TaskResult, Duration)], to driver: inout Driver) async {
        let now = time.now()
        var stored: [TaskOutcome] = []
        var applied: [(StoredTask, TaskResult, TaskPause?)] = []
        var discarded: [StoredTask] = []
        for (task, result, started) in outcomes {
            handleDuration.recordNanoseconds(max(0, (time.elapsed() - started).nanoseconds))
            // Still the stored revision? A deleted or replaced action's outcome is ignored.
            let state = driver.queues[task.queueName]
            let isCurrent = state?.held?.task.key == task.key && state?.held?.task.collection == task.collection
                && state?.held?.task.revision == task.revision
            guard isCurrent else {
                discarded.append(task)
                continue
            }
            switch result {
            case .success:
                stored.append(.completed(task))
                applied.append((task, result, nil))
            case .retry(let after):
                let pause: TaskPause? = after > .zero ? .until(now.addingTimeInterval(after.timeInterval)) : nil
                stored.append(.failed(task, pause: pause))
                applied.append((task, result, pause))
            case .waitForRestart:
                stored.append(.failed(task, pause: .untilRestart))
                applied.append((task, result, .untilRestart))
            }
        }
        var commitFailed = false
        do {
            try await storage.finish(stored, owner: owner)
        } catch {
            logger.error("could not store \(stored.count) outcome(s); their queues wait for restartQueues: \(error)")
            commitFailed = true
        }
        for task in discarded {
            finishRunning(task.queueName, in: &driver)
            events.yield(.discarded(queueName: task.queueName, key: task.key, collection: task.collection))
            markReady(task.queueName, in: &driver)
        }
        for (task, result, pause) in applied {
            let queueName = task.queueName
            finishRunning(queueName, in: &driver)
            guard var state = driver.queues[queueName], var held = state.held else { continue }
            if commitFailed {
                // Unknown what is on disk: keep the action first and wait for a restart.
                held.task.pause = .untilRestart
                state.held = held
                driver.queues[queueName] = state
                driver.storageStalled.insert(queueName)
                continue
            }
            switch result {
            case .success:
                state.held = nil
                driver.queues[queueName] = state
                driver.locations[ActionID(task)] = nil
                handled.increment()
                events.yield(.succeeded(queueName: queueName, key: task.key, collection: task.collection))
            case .retry, .waitForRestart:
                held.task.attempts += 1
                held.task.pause = pause
                state.held = held
                driver.queues[queueName] = state
                failed.increment()
                if case .retry = result { retried.increment() }
                logger.debug("action \(task.collection)/\(task.key) of \(queueName) failed: \(result)")
                events.yield(.failed(queueName: queueName, key: task.key, collection: task.collection, result: result))
                if case .until(let date)? = pause {
                    startTimer(queueName, until: date, in: &driver)
                }
            }
            markReady(queueName, in: &driver)
        }
    }

    private func finishRunning(_ queueName: String, in driver: inout Driver) {
        driver.queues[queueName]?.inFlight = nil
        driver.running -= 1
        _ = inFlightView.withLock { $0.removeValue(forKey: queueName) }
    }

    // MARK: Starting actions

    private func schedule(_ driver: inout Driver) async {
        while !driver.stopping {
            var picks: [Entry] = []
            while driver.running + picks.count < configuration.maxConcurrentQueues, !driver.ready.isEmpty {
                let queueName = driver.ready.removeFirst()
                driver.readySet.remove(queueName)
                guard var state = driver.queues[queueName], state.inFlight == nil else { continue }
                if state.held == nil, state.head < state.entries.count {
                    // Move the head out of the list; it stays the sticky head until it succeeds.
                    state.held = state.entries[state.head]
                    state.head += 1
                    if state.head > 1024, state.head * 2 > state.entries.count {
                        state.entries.removeFirst(state.head)
                        state.head = 0
                    }
                }
                guard let held = state.held, held.task.pause == nil else {
                    driver.queues[queueName] = state
                    continue
                }
                driver.queues[queueName] = state
                picks.append(held)
            }
            if picks.isEmpty { return }
            let granted: [Bool]
            do {
                granted = try await storage.claim(picks.map(\.task), owner: owner, leaseDuration: configuration.leaseDuration)
            } catch {
                logger.error("could not claim \(picks.count) action(s); retrying when the next change arrives: \(error)")
                for pick in picks {
                    driver.storageStalled.insert(pick.task.queueName)
                }
                return
            }
            for (pick, isGranted) in zip(picks, granted) {
                let queueName = pick.task.queueName
                guard isGranted else {
                    // Gone or changed behind our back (another process): drop it, look again.
                    driver.queues[queueName]?.held = nil
                    driver.locations[ActionID(pick.task)] = nil
                    markReady(queueName, in: &driver)
                    continue
                }
                start(pick, in: &driver)
            }
        }
    }

    private func start(_ entry: Entry, in driver: inout Driver) {
        let task = entry.task
        driver.queues[task.queueName]?.inFlight = task
        driver.running += 1
        inFlightView.withLock { $0[task.queueName] = task.key }
        let now = time.elapsed()
        queueWait.recordNanoseconds(max(0, (now - entry.since).nanoseconds))
        events.yield(.started(queueName: task.queueName, key: task.key, collection: task.collection, attempt: task.attempts + 1))
        let mailbox = self.mailbox
        guard let action = entry.action else {
            logger.error("action \(task.collection)/\(task.key) of \(task.queueName) does not decode as \(Action.self); pausing its queue")
            events.yield(.undecodable(queueName: task.queueName, key: task.key, collection: task.collection))
            mailbox.post(.finished(task, .waitForRestart, started: now))
            return
        }
        let handler = self.handler
        Task {
            let result = await handler.handle(action)
            mailbox.post(.finished(task, result, started: now))
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

    func stream() -> AsyncStream<TaskBrokerEvent> {
        let (stream, continuation) = AsyncStream<TaskBrokerEvent>.makeStream()
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func yield(_ event: TaskBrokerEvent) {
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
