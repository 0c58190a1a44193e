import Foundation
import QueueRetry
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker
import Testing

/// Drives a ``BrokerStateMachine`` without I/O: feed inputs, read the outputs.
struct MachineHarness {
    typealias Input = BrokerStateMachine.Input
    typealias Output = BrokerStateMachine.Output

    var machine: BrokerStateMachine
    private var sequence: Int64 = 0

    init(
        maxConcurrentQueues: Int = 16, claimsHeads: Bool = false, keepsIdleQueuesUpTo: Int = 1024,
        accepts: @escaping (String) -> Bool = { _ in true }, forgets: @escaping ([String]) -> Void = { _ in },
        acceptance: ((String) -> BrokerStateMachine.Acceptance)? = nil, wallClockAnchor: Date = Date(timeIntervalSince1970: 0),
        renewalInterval: Duration? = nil
    ) {
        machine = BrokerStateMachine(
            configuration: .init(
                maxConcurrentQueues: maxConcurrentQueues, claimsHeads: claimsHeads,
                storageBackoff: Backoff(initial: .milliseconds(100), maximum: .seconds(1)),
                nextHeadLifetime: .seconds(2), keepsIdleQueuesUpTo: keepsIdleQueuesUpTo, wallClockAnchor: wallClockAnchor,
                renewalInterval: renewalInterval, renewalRetry: .milliseconds(500)
            ),
            accepts: acceptance ?? { accepts($0) ? .runs : .refused }, forgets: forgets
        )
    }

    /// Feeds inputs as one batch, and checks that the machine moved no queue's slot in a way its
    /// transitions refuse (``BrokerStateMachine/refusedTransitions``).
    mutating func send(_ inputs: Input...) -> [Output] {
        let out = machine.handle(inputs)
        #expect(machine.refusedTransitions == 0, "the machine tried a move of a queue's slot that its transitions refuse")
        return out
    }

    /// A new stored version of an action: revisions and positions grow with each call.
    mutating func entry(
        _ key: String, _ queueName: String, priority: Int? = nil, attempts: Int = 0, pause: TaskPause? = nil,
        position: Int64? = nil, undecodable: Bool = false, notBefore: Date? = nil, storedPriority: Int = 0
    ) -> BrokerEntry {
        sequence += 1
        let task = StoredTask(
            key: key, collection: "c", queueName: queueName, payload: Data(), position: position ?? sequence,
            revision: sequence, attempts: attempts, pause: pause, notBefore: notBefore, priority: storedPriority
        )
        let box: (any BrokerActionBox)? = undecodable ? nil
            : priority.map { TypedActionBox(PrioritizedAction(key: key, queueName: queueName, priority: $0)) }
            ?? TypedActionBox(TestAction(key: key, queueName: queueName))
        return BrokerEntry(task: task, action: box, since: .zero)
    }

    /// The same action saved again: a new revision, the same position.
    mutating func resaved(_ entry: BrokerEntry) -> BrokerEntry {
        sequence += 1
        var copy = entry
        copy.task.revision = sequence
        copy.task.attempts = 0
        copy.task.pause = nil
        return copy
    }

    /// A queue read: its entries in run order.
    static func loaded(_ queueName: String, _ entries: [BrokerEntry]) -> Input {
        .loaded([queueName: entries], requested: [queueName])
    }
}

extension BrokerOutcome {
    static func success(_ entry: BrokerEntry, next: BrokerEntry? = nil) -> BrokerOutcome {
        BrokerOutcome(task: entry.task, result: .success, pause: nil, next: next?.task)
    }

    static func failure(_ entry: BrokerEntry, _ result: TaskResult = .retry(after: .zero), pause: TaskPause? = nil) -> BrokerOutcome {
        BrokerOutcome(task: entry.task, result: result, pause: pause)
    }
}

extension [BrokerStateMachine.Output] {
    /// The keys of the actions to run, in order.
    var runs: [String] {
        flatMap { output -> [String] in
            if case .run(let entries, _, _) = output { return entries.map(\.task.key) }
            return []
        }
    }

    /// For each action to run, in order, the next head its finish claims (`nil`: none).
    var nextHeads: [String?] {
        flatMap { output -> [String?] in
            if case .run(_, let next, _) = output { return next.map { $0?.key } }
            return []
        }
    }

    /// The entries to run, in order.
    var runEntries: [BrokerEntry] {
        flatMap { output -> [BrokerEntry] in
            if case .run(let entries, _, _) = output { return entries }
            return []
        }
    }

    var events: [TaskBrokerEvent] {
        compactMap { output in
            if case .emit(let event) = output { return event }
            return nil
        }
    }

    var loads: [[String]] {
        compactMap { output in
            if case .load(let names, _) = output { return names }
            return nil
        }
    }

    /// How many leases each read asked for may take.
    var loadBudgets: [Int] {
        compactMap { output in
            if case .load(_, let budget) = output { return budget }
            return nil
        }
    }

    /// The names after which stored queues are to be listed.
    var listings: [String] {
        compactMap { output in
            if case .listQueues(let name) = output { return name }
            return nil
        }
    }

    /// The reads ahead asked for, as `queue>position`.
    var readAheads: [String] {
        flatMap { output -> [String] in
            if case .readAhead(let requests) = output { return requests.map { "\($0.queueName)>\($0.after)" } }
            return []
        }
    }

    /// The tokens of the reads ahead asked for, by queue.
    var readAheadTokens: [String: UInt64] {
        var tokens: [String: UInt64] = [:]
        for case .readAhead(let requests) in self {
            for request in requests { tokens[request.queueName] = request.token }
        }
        return tokens
    }

    /// The reads of the schedule asked for, as (after, through).
    var scheduleReads: [(after: TaskScheduleEntry, through: Date)] {
        compactMap { output in
            if case .findScheduled(let after, let through) = output { return (after, through) }
            return nil
        }
    }

    /// The wall-clock times of the timers started.
    var timerDates: [Date] {
        timers.compactMap { timer in
            if case .until(let date) = timer.delay { return date }
            return nil
        }
    }

    var claims: [[String]] {
        compactMap { output in
            if case .claim(let heads) = output { return heads.map(\.key) }
            return nil
        }
    }

    /// For each action to run, in order, the epoch of the lease it runs under.
    var runEpochs: [Int64] {
        flatMap { output -> [Int64] in
            if case .run(_, _, let epochs) = output { return epochs }
            return []
        }
    }

    /// The queues of each renewal.
    var renewals: [[String]] {
        renewedLeases.map { $0.map(\.queueName) }
    }

    /// The leases of each renewal.
    var renewedLeases: [[TaskQueueLease]] {
        compactMap { output in
            if case .renew(let leases) = output { return leases }
            return nil
        }
    }

    /// The queues of each release as the broker stops.
    var releases: [[String]] {
        releasedLeases.map { $0.map(\.queueName) }
    }

    /// The leases of each release as the broker stops.
    var releasedLeases: [[TaskQueueLease]] {
        compactMap { output in
            if case .release(let leases) = output { return leases }
            return nil
        }
    }

    /// The leases of each release of leases a renewal extended after their outcome released them.
    var releasedAgain: [[TaskQueueLease]] {
        compactMap { output in
            if case .releaseAgain(let leases) = output { return leases }
            return nil
        }
    }

    var stores: [[BrokerOutcome]] {
        compactMap { output in
            if case .store(let outcomes) = output { return outcomes }
            return nil
        }
    }

    var timers: [(token: UInt64, delay: BrokerStateMachine.TimerDelay)] {
        compactMap { output in
            if case .startTimer(let token, let delay) = output { return (token, delay) }
            return nil
        }
    }

    var cancelledTimers: [UInt64] {
        compactMap { output in
            if case .cancelTimer(let token) = output { return token }
            return nil
        }
    }

    /// How many times the machine asks the pool's other workers for queues.
    var asks: Int { room.count }

    /// The room each ask for queues announces.
    var room: [Int] {
        compactMap { output in
            if case .announceSpareCapacity(let room) = output { return room }
            return nil
        }
    }

    var finishes: Bool {
        contains { if case .finish = $0 { return true } else { return false } }
    }

    var cancelsHandlers: Bool {
        contains { if case .cancelHandlers = $0 { return true } else { return false } }
    }

    var drainsCommitter: Bool {
        contains { if case .drainCommitter = $0 { return true } else { return false } }
    }

    /// The storage failures reported, as `operation queue,queue retryIn`.
    var storageFailures: [String] {
        events.compactMap { event in
            if case .storageFailed(let operation, let names, _, let retryIn) = event {
                return "\(operation) \(names.joined(separator: ",")) \(retryIn)"
            }
            return nil
        }
    }
}
