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
///
/// The job system's rules too: an action saved to run later holds its queue until its time
/// (wall clock); the ``maxAttempts``-th failure, or `.deadLetter(reason:)`, moves the head to
/// its queue's dead letters (`.failed`, then `.deadLettered`) and the queue goes on; a replayed
/// dead letter goes back to its place (by position) with no attempts, behind a head that has
/// started and not succeeded (the sticky head: a new broker reads a paused action first; a new
/// version of the sticky head has not started, and goes by position); an operator's pause holds a
/// queue (`.paused` once the broker reads it; `.resumed` when resumed) without touching what is
/// stored; `saveIfAbsent` stores only a key stored nowhere (dead letters count).
struct BrokerModel {
    static let collection = "model"
    /// The broker's `Configuration.maxAttempts`.
    static let maxAttempts = 2

    /// A stored pause: until a time on the test's clock, or until `restartQueues`.
    enum Pause: Hashable {
        case until(Duration)
        case untilRestart
    }

    /// A stored action.
    struct Stored: Hashable, CustomStringConvertible {
        var key: String
        var version: Int
        /// Its place in its queue (enqueue order); a save of a stored key keeps it.
        var position: Int
        var attempts = 0
        var pause: Pause?
        /// When it may start, on the test's clock (saved to run later).
        var notBefore: Duration?
        /// Why it became a dead letter.
        var reason: String?

        var description: String {
            let pause = switch pause {
            case nil: ""
            case .until(let offset)?: " paused until \(offset)"
            case .untilRestart?: " paused until restart"
            }
            return "\(key) v\(version) attempts \(attempts)\(pause)" + (notBefore.map { " not before \($0)" } ?? "")
                + (reason.map { " dead: \($0)" } ?? "")
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
    /// Each queue's dead letters, by position.
    private(set) var deadLetters: [String: [Stored]] = [:]
    /// The queues an operator paused (stored).
    private(set) var paused: Set<String> = []
    /// The queues the running broker has read (it reads a queue when it starts, if the queue has
    /// anything stored, or when the queue first changes); it reports an operator's pause of a queue
    /// when it reads it.
    private(set) var known: Set<String> = []
    private var positions = 0
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

    /// Whether `key` is stored: live or a dead letter.
    func isStored(_ key: String) -> Bool {
        location(of: key) != nil || deadLetterLocation(of: key) != nil
    }

    /// The queue whose dead letters hold `key`, and its index there.
    func deadLetterLocation(of key: String) -> (queue: String, index: Int)? {
        for queue in queueNames {
            if let index = deadLetters[queue]?.firstIndex(where: { $0.key == key }) { return (queue, index) }
        }
        return nil
    }

    /// The queue that holds `key` live, and its index there.
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

    /// A save of a key that is not stored: it goes last in its queue, to start no earlier than
    /// `notBefore` (on the test's clock) if given.
    mutating func add(_ key: String, to queue: String, notBefore: Duration? = nil) -> VersionedAction {
        precondition(!isStored(key), "\(key) is stored already")
        versions += 1
        positions += 1
        queues[queue, default: []].append(Stored(key: key, version: versions, position: positions, notBefore: notBefore))
        learn(queue)
        startReadyHeads()
        return VersionedAction(key: key, queueName: queue, version: versions)
    }

    /// `saveIfAbsent`: an add, unless the key is stored (live or a dead letter).
    /// - Returns: The action saved, or `nil`.
    mutating func addIfAbsent(_ key: String, to queue: String) -> VersionedAction? {
        isStored(key) ? nil : add(key, to: queue)
    }

    /// `pauseQueues`: a running broker reads each queue newly paused and reports `.paused`.
    mutating func pause(_ names: [String]) {
        for queue in names where paused.insert(queue).inserted && isRunning {
            known.insert(queue)
            events[queue, default: []].append(.paused(queueName: queue))
        }
    }

    /// `resumeQueues`: a running broker that knew the queue paused reports `.resumed` and runs it.
    mutating func resume(_ names: [String]) {
        for queue in names where paused.remove(queue) != nil && isRunning {
            if known.insert(queue).inserted { continue }  // read now, unpaused: nothing to report
            events[queue, default: []].append(.resumed(queueName: queue))
        }
        startReadyHeads()
    }

    /// `replayDeadLetter`: back at its place in its queue, with no attempts.
    /// - Returns: Whether it was a dead letter.
    mutating func replay(_ key: String) -> Bool {
        guard let (queue, index) = deadLetterLocation(of: key) else { return false }
        var stored = deadLetters[queue]!.remove(at: index)
        stored.attempts = 0
        stored.pause = nil
        stored.reason = nil
        // By position, but behind a head that has started and not succeeded (running or paused):
        // the sticky head stays first.
        let line = queues[queue, default: []]
        let running = flights[queue].map { $0.isCurrent && $0.run.key == line.first?.key } ?? false
        let sticky = running || line.first?.pause != nil ? 1 : 0
        let place = line.indices.dropFirst(sticky).first { line[$0].position > stored.position } ?? line.count
        queues[queue]!.insert(stored, at: place)
        learn(queue)
        startReadyHeads()
        return true
    }

    /// `discardDeadLetter`.
    /// - Returns: Whether it was a dead letter.
    mutating func discard(_ key: String) -> Bool {
        guard let (queue, index) = deadLetterLocation(of: key) else { return false }
        deadLetters[queue]!.remove(at: index)
        return true
    }

    /// A save of a stored key (same queue): it keeps its place, its attempts and pause are
    /// cleared; a run of the old version in flight is ignored and the new version runs after it.
    mutating func replace(_ key: String) -> VersionedAction {
        guard let (queue, index) = location(of: key) else { preconditionFailure("\(key) is not stored") }
        // A paused head saved again: the pause ends with the old version (`.resumed`).
        if index == 0, isRunning, isFailurePausedNow(queue) { events[queue, default: []].append(.resumed(queueName: queue)) }
        versions += 1
        queues[queue]![index] = Stored(key: key, version: versions, position: queues[queue]![index].position)
        if flights[queue]?.run.key == key { flights[queue]?.isCurrent = false }
        if index == 0 {
            fired.remove(queue)
            // The new version has not started: it is no sticky head, and takes its place by
            // position (a dead letter replayed behind the old version may come first).
            queues[queue]!.sort { $0.position < $1.position }
        }
        startReadyHeads()
        return VersionedAction(key: key, queueName: queue, version: versions)
    }

    /// A delete (cancel): the action is gone; a run of it in flight is ignored.
    /// - Returns: Whether it was stored.
    mutating func delete(_ key: String) -> Bool {
        if discard(key) { return true }
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
        deadLetters[queue] = []
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
            // The run's action: the head when it started (a dead letter replayed meanwhile may
            // have taken a place before it).
            guard let index = queues[queue]?.firstIndex(where: { $0.key == key }) else { preconditionFailure("\(key) is not stored") }
            let failures = queues[queue]![index].attempts + 1
            if result != .success, failures >= Self.maxAttempts || result.isDeadLetterResult {
                var dead = queues[queue]!.remove(at: index)
                dead.attempts = failures
                dead.pause = nil
                dead.reason = result.isDeadLetterResult ? result.modelReason
                    : "failed \(failures) time(s), the most maxAttempts allows; last: \(result.modelReason)"
                deadLetters[queue, default: []].append(dead)
                deadLetters[queue]!.sort { $0.position < $1.position }
                events[queue, default: []].append(.failed(queueName: queue, key: key, collection: Self.collection, result: result))
                events[queue, default: []].append(.deadLettered(queueName: queue, key: key, collection: Self.collection, reason: dead.reason!))
                fired.remove(queue)
                startReadyHeads()
                return
            }
            switch result {
            case .success:
                queues[queue]!.remove(at: index)
                events[queue, default: []].append(.succeeded(queueName: queue, key: key, collection: Self.collection))
            case .retry(let after):
                queues[queue]![index].attempts += 1
                queues[queue]![index].pause = after > .zero ? .until(now + after) : nil
                events[queue, default: []].append(.failed(queueName: queue, key: key, collection: Self.collection, result: result))
            case .waitForRestart:
                queues[queue]![index].attempts += 1
                queues[queue]![index].pause = .untilRestart
                events[queue, default: []].append(.failed(queueName: queue, key: key, collection: Self.collection, result: result))
            case .deadLetter:
                preconditionFailure("handled above")
            }
            fired.remove(queue)
        }
        startReadyHeads()
    }

    /// Time passes: the timed retries due fire (`.resumed`) and their heads run again.
    mutating func advance(by duration: Duration) {
        now += duration
        startReadyHeads()
    }

    /// `restartQueues`: every stored pause of these queues is cleared; a paused queue resumes
    /// (`.resumed`) and runs its head again.
    mutating func restart(_ names: [String]) {
        for queue in names {
            if isRunning, isFailurePausedNow(queue) { events[queue, default: []].append(.resumed(queueName: queue)) }
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
        // A new broker reads each queue in position order, its paused action first.
        for queue in queueNames {
            var line = (queues[queue] ?? []).sorted { $0.position < $1.position }
            if let paused = line.firstIndex(where: { $0.pause != nil }) { line.insert(line.remove(at: paused), at: 0) }
            queues[queue] = line
        }
        known = Set(queueNames.filter { !(queues[$0] ?? []).isEmpty || !(deadLetters[$0] ?? []).isEmpty })
        for queue in queueNames where known.contains(queue) && paused.contains(queue) {
            events[queue, default: []].append(.paused(queueName: queue))
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
        known = []
    }

    // MARK: - Rules

    /// The running broker reads a queue it did not know when it changes; an operator's pause is
    /// reported then.
    private mutating func learn(_ queue: String) {
        guard isRunning, known.insert(queue).inserted, paused.contains(queue) else { return }
        events[queue, default: []].append(.paused(queueName: queue))
    }

    /// Whether the queue's head cannot start now: a failure's pause, an operator's pause, or a
    /// time to run later that has not come.
    private func isPausedNow(_ queue: String) -> Bool {
        if paused.contains(queue) { return true }
        if let notBefore = queues[queue]?.first?.notBefore, notBefore > now { return true }
        return isFailurePausedNow(queue)
    }

    /// Whether the queue's head waits for a timer or a restart right now.
    private func isFailurePausedNow(_ queue: String) -> Bool {
        guard flights[queue] == nil, let pause = queues[queue]?.first?.pause else { return false }
        if case .until = pause, fired.contains(queue) { return false }
        return true
    }

    /// Every queue with nothing in flight whose head's timed retry is due fires it (`.resumed`),
    /// then every queue with nothing in flight and an unpaused head starts it. (A head's timer
    /// can come due while another action of its queue runs: a dead letter replayed before it.)
    private mutating func startReadyHeads() {
        guard isRunning else { return }
        for queue in queueNames where flights[queue] == nil && !fired.contains(queue) {
            if case .until(let deadline)? = queues[queue]?.first?.pause, deadline <= now {
                fired.insert(queue)
                events[queue, default: []].append(.resumed(queueName: queue))
            }
        }
        for queue in queueNames where flights[queue] == nil {
            guard let head = queues[queue]?.first, !isPausedNow(queue) else { continue }
            let run = Run(queue: queue, key: head.key, version: head.version, attempt: head.attempts + 1)
            flights[queue] = Flight(run: run)
            runs.append(run)
            events[queue, default: []].append(.started(queueName: queue, key: head.key, collection: Self.collection, attempt: run.attempt))
        }
    }
}

extension TaskResult {
    var isDeadLetterResult: Bool {
        if case .deadLetter = self { true } else { false }
    }

    /// The reason the broker stores with the failure (`TaskResult.failureReason`).
    var modelReason: String {
        switch self {
        case .success: ""
        case .retry(let after): after > .zero ? "the handler asked to retry after \(after)" : "the handler asked to retry at once"
        case .waitForRestart: "the handler asked to wait for a restart"
        case .deadLetter(let reason): reason
        }
    }
}
