import Foundation
import TaskBroker

/// The action of the model test: `version` tells the saves of one key apart.
struct VersionedAction: TaskQueueAction, Equatable {
    var key: String
    var collection = BrokerModel.collection
    var queueName: String
    var version: Int
}

/// What one broker on one SQLite file should do, as a value (`BrokerModelTests` drives a real
/// broker through the same operations and compares).
///
/// It holds the stored actions of each queue in run order (the default `sort`: enqueue order; a
/// save of a stored key keeps its place, a key saved anew goes last) with their attempts and
/// pauses, the run in flight per queue, and the time on the test's clock. Each operation applies
/// the README's rules ("Semantics") and notes what the broker should report meanwhile: the events
/// of each queue, in order, and the handler's runs. The broker starts the head of every queue that
/// has nothing in flight and is not paused, at once; a success deletes the head, a failure counts
/// an attempt and pauses the queue (`retry(after: t > 0)`: until its timer fires, with `.resumed`;
/// `waitForRestart`: until `restartQueues`, with `.resumed`; `retry(after: .zero)`: not at all);
/// the outcome of a run whose action was deleted or saved again meanwhile is ignored
/// (`.discarded`), and nothing else of its queue starts before it ends.
struct BrokerModel {
    static let collection = "model"

    /// A stored pause: until a time on the test's clock, or until `restartQueues`.
    enum Pause: Hashable {
        case until(Duration)
        case untilRestart
    }

    /// A stored action.
    struct Stored: Hashable, CustomStringConvertible {
        var key: String
        var version: Int
        var attempts = 0
        var pause: Pause?

        var description: String {
            let pause = switch pause {
            case nil: ""
            case .until(let offset)?: " paused until \(offset)"
            case .untilRestart?: " paused until restart"
            }
            return "\(key) v\(version) attempts \(attempts)\(pause)"
        }
    }

    /// A run of the handler: which version of which action, and its attempt.
    struct Run: Hashable, Sendable, CustomStringConvertible {
        var queue: String
        var key: String
        var version: Int
        var attempt: Int

        var description: String { "\(queue)/\(key) v\(version) #\(attempt)" }
    }

    /// The run in flight of a queue; `isCurrent` is false once its action was deleted or saved
    /// again: then its outcome is ignored.
    struct Flight {
        var run: Run
        var isCurrent = true
    }

    let queueNames: [String]
    private(set) var queues: [String: [Stored]]
    private(set) var flights: [String: Flight] = [:]
    /// Queues whose head's timed pause has fired in the running broker (the stored pause stays
    /// until the head's next outcome is stored).
    private(set) var fired: Set<String> = []
    private(set) var isRunning = false
    /// The time on the test's clock since the test began.
    private(set) var now: Duration = .zero
    private var versions = 0

    /// What the broker should have reported since the last ``clearExpectations()``: the events of
    /// each queue in order, and the runs the handler was given.
    private(set) var events: [String: [TaskBrokerEvent]] = [:]
    private(set) var runs: [Run] = []

    init(queueNames: [String]) {
        self.queueNames = queueNames
        queues = Dictionary(uniqueKeysWithValues: queueNames.map { ($0, []) })
    }

    mutating func clearExpectations() {
        events = [:]
        runs = []
    }

    /// The queue that holds `key`, and its index there.
    func location(of key: String) -> (queue: String, index: Int)? {
        for queue in queueNames {
            if let index = queues[queue]?.firstIndex(where: { $0.key == key }) { return (queue, index) }
        }
        return nil
    }

    /// The deadlines of the timed retries the running broker waits for, with how many wait for each.
    var timers: [Duration: Int] {
        guard isRunning else { return [:] }
        var timers: [Duration: Int] = [:]
        for queue in queueNames where flights[queue] == nil && !fired.contains(queue) {
            if case .until(let deadline)? = queues[queue]?.first?.pause, deadline > now {
                timers[deadline, default: 0] += 1
            }
        }
        return timers
    }

    // MARK: - Operations

    /// A save of a key that is not stored: it goes last in its queue.
    mutating func add(_ key: String, to queue: String) -> VersionedAction {
        precondition(location(of: key) == nil, "\(key) is stored already")
        versions += 1
        queues[queue, default: []].append(Stored(key: key, version: versions))
        startReadyHeads()
        return VersionedAction(key: key, queueName: queue, version: versions)
    }

    /// A save of a stored key (same queue): it keeps its place, its attempts and pause are
    /// cleared; a run of the old version in flight is ignored and the new version runs after it.
    mutating func replace(_ key: String) -> VersionedAction {
        guard let (queue, index) = location(of: key) else { preconditionFailure("\(key) is not stored") }
        // A paused head saved again: the pause ends with the old version (`.resumed`).
        if index == 0, isRunning, isPausedNow(queue) { events[queue, default: []].append(.resumed(queueName: queue)) }
        versions += 1
        queues[queue]![index] = Stored(key: key, version: versions)
        if flights[queue]?.run.key == key { flights[queue]?.isCurrent = false }
        if index == 0 { fired.remove(queue) }
        startReadyHeads()
        return VersionedAction(key: key, queueName: queue, version: versions)
    }

    /// A delete (cancel): the action is gone; a run of it in flight is ignored.
    /// - Returns: Whether it was stored.
    mutating func delete(_ key: String) -> Bool {
        guard let (queue, index) = location(of: key) else { return false }
        queues[queue]!.remove(at: index)
        if flights[queue]?.run.key == key { flights[queue]?.isCurrent = false }
        if index == 0 { fired.remove(queue) }
        startReadyHeads()
        return true
    }

    /// `purge`: every action of the queue is gone; a run in flight is ignored.
    /// - Returns: How many actions were stored.
    mutating func purge(_ queue: String) -> Int {
        let count = queues[queue]?.count ?? 0
        queues[queue] = []
        flights[queue]?.isCurrent = false
        fired.remove(queue)
        return count
    }

    /// The handler answers `result` for the run in flight of `queue`.
    mutating func finish(_ queue: String, with result: TaskResult) {
        guard let flight = flights.removeValue(forKey: queue) else { preconditionFailure("nothing runs in \(queue)") }
        let key = flight.run.key
        if !flight.isCurrent {
            events[queue, default: []].append(.discarded(queueName: queue, key: key, collection: Self.collection))
        } else {
            precondition(queues[queue]?.first?.key == key, "the current run is of the head")
            switch result {
            case .success:
                queues[queue]!.removeFirst()
                events[queue, default: []].append(.succeeded(queueName: queue, key: key, collection: Self.collection))
            case .retry(let after):
                queues[queue]![0].attempts += 1
                queues[queue]![0].pause = after > .zero ? .until(now + after) : nil
                events[queue, default: []].append(.failed(queueName: queue, key: key, collection: Self.collection, result: result))
            case .waitForRestart:
                queues[queue]![0].attempts += 1
                queues[queue]![0].pause = .untilRestart
                events[queue, default: []].append(.failed(queueName: queue, key: key, collection: Self.collection, result: result))
            case .deadLetter(let reason):
                queues[queue]!.removeFirst()
                events[queue, default: []].append(.failed(queueName: queue, key: key, collection: Self.collection, result: result))
                events[queue, default: []].append(.deadLettered(queueName: queue, key: key, collection: Self.collection, reason: reason))
            }
            fired.remove(queue)
        }
        startReadyHeads()
    }

    /// Time passes: the timed retries due fire (`.resumed`) and their heads run again.
    mutating func advance(by duration: Duration) {
        now += duration
        guard isRunning else { return }
        for queue in queueNames where flights[queue] == nil && !fired.contains(queue) {
            if case .until(let deadline)? = queues[queue]?.first?.pause, deadline <= now {
                fired.insert(queue)
                events[queue, default: []].append(.resumed(queueName: queue))
            }
        }
        startReadyHeads()
    }

    /// `restartQueues`: every stored pause of these queues is cleared; a paused queue resumes
    /// (`.resumed`) and runs its head again.
    mutating func restart(_ names: [String]) {
        for queue in names {
            if isRunning, isPausedNow(queue) { events[queue, default: []].append(.resumed(queueName: queue)) }
            for index in queues[queue, default: []].indices {
                queues[queue]![index].pause = nil
            }
            fired.remove(queue)
        }
        startReadyHeads()
    }

    /// A new broker starts on the stored state: a timed retry already due fires at once.
    mutating func start() {
        precondition(!isRunning)
        isRunning = true
        fired = []
        for queue in queueNames {
            if case .until(let deadline)? = queues[queue]?.first?.pause, deadline <= now {
                fired.insert(queue)
                events[queue, default: []].append(.resumed(queueName: queue))
            }
        }
        startReadyHeads()
    }

    /// The broker shuts down. Graceful (`outcomes` for every run in flight): the handlers finish
    /// and their outcomes are stored, nothing new starts. Abandoned (`nil`, after the shutdown
    /// timeout): the runs in flight are cancelled and their outcomes ignored; their actions stay
    /// stored as they were (a run that did not end counts no attempt).
    mutating func stop(outcomes: [String: TaskResult]?) {
        precondition(isRunning)
        isRunning = false
        if let outcomes {
            for queue in queueNames where flights[queue] != nil {
                finish(queue, with: outcomes[queue] ?? .success)
            }
        }
        flights = [:]
        fired = []
    }

    // MARK: - Rules

    /// Whether the queue's head waits for a timer or a restart right now.
    private func isPausedNow(_ queue: String) -> Bool {
        guard flights[queue] == nil, let pause = queues[queue]?.first?.pause else { return false }
        if case .until = pause, fired.contains(queue) { return false }
        return true
    }

    /// Every queue with nothing in flight and an unpaused head starts it.
    private mutating func startReadyHeads() {
        guard isRunning else { return }
        for queue in queueNames where flights[queue] == nil {
            guard let head = queues[queue]?.first, !isPausedNow(queue) else { continue }
            let run = Run(queue: queue, key: head.key, version: head.version, attempt: head.attempts + 1)
            flights[queue] = Flight(run: run)
            runs.append(run)
            events[queue, default: []].append(.started(queueName: queue, key: head.key, collection: Self.collection, attempt: run.attempt))
        }
    }
}
