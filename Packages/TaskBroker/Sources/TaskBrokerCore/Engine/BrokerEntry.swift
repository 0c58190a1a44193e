import Foundation

/// An action a broker knows of: its stored version, the decoded action and when the broker
/// learned of it (for the queue-wait metric).
///
/// The three are kept in one immutable object, so that a copy (the state machine moves entries
/// between its waiting lists, the line of starts and the outputs) is one reference, not the
/// stored action's three strings, payload and box: entry copies and destructions were ~11 % of a
/// burn-down worker's CPU. Setting `task` (a pause, rarely) makes a new object.
struct BrokerEntry: Sendable {
    /// Immutable, and every stored property is `Sendable`: safe to share between threads.
    private final class Storage: Sendable {
        let task: StoredTask
        let action: (any BrokerActionBox)?
        let since: Duration

        init(task: StoredTask, action: (any BrokerActionBox)?, since: Duration) {
            self.task = task
            self.action = action
            self.since = since
        }
    }

    private var storage: Storage

    /// - Parameters:
    ///   - task: The stored version.
    ///   - action: The decoded action, or `nil` when the payload does not decode as the handler's type.
    ///   - since: When the broker learned of this version, on the broker's clock.
    init(task: StoredTask, action: (any BrokerActionBox)?, since: Duration) {
        storage = Storage(task: task, action: action, since: since)
    }

    /// The stored version.
    var task: StoredTask {
        get { storage.task }
        set { storage = Storage(task: newValue, action: storage.action, since: storage.since) }
    }

    /// The decoded action, or `nil` when the payload does not decode as the handler's type.
    var action: (any BrokerActionBox)? { storage.action }

    /// When the broker learned of this version, on the broker's clock.
    var since: Duration { storage.since }

    /// Read from the stored object itself, not through `task`'s getter (a copy of the whole action).
    var id: BrokerActionID { BrokerActionID(storage.task) }
}

/// What became of a run, on its way to the database.
struct BrokerOutcome: Sendable {
    let task: StoredTask
    let result: TaskResult
    let pause: TaskPause?
    /// On a shared backend, for a success: the queue's next head when the action started, which the
    /// finish claims along with the outcome (``TaskStorage/finish(_:claimingNext:owner:leaseDuration:)``).
    let next: StoredTask?
    /// The epoch of the lease the action ran under (its claim's; `0` on a backend without
    /// leases): storage stores the outcome only while the broker holds the lease under it.
    let epoch: Int64
    /// The failure moves the action to the dead letters.
    let deadLetter: Bool
    /// For a failure: what failed, in words.
    let reason: String?
    /// For a failure: when it failed (wall clock); the engine stamps an outcome that the state
    /// machine, which has no wall clock, made (``stamped(at:)``).
    private(set) var failedAt: Date?

    init(
        task: StoredTask, result: TaskResult, pause: TaskPause?, next: StoredTask? = nil, epoch: Int64 = 0,
        reason: String? = nil, failedAt: Date? = nil, maxAttempts: Int? = nil
    ) {
        self.task = task
        self.result = result
        self.next = next
        self.epoch = epoch
        // The attempt that fails now is the last one allowed.
        let exhausted = result != .success && maxAttempts.map { task.nextAttempt >= max(1, $0) } ?? false
        deadLetter = result.isDeadLetter || exhausted
        self.pause = deadLetter ? nil : pause
        let given = result == .success ? nil : reason ?? result.failureReason
        if exhausted, !result.isDeadLetter, let given {
            self.reason = "failed \(task.nextAttempt) time(s), the most maxAttempts allows; last: \(given)"
        } else {
            self.reason = given
        }
        self.failedAt = result == .success ? nil : failedAt
    }

    /// The failure as it is stored with the action (`nil` for a success).
    var failure: TaskFailure? {
        reason.map { TaskFailure(reason: $0, failedAt: failedAt ?? Date(timeIntervalSince1970: 0)) }
    }

    /// This outcome with its failure's time set, if it was not.
    func stamped(at date: Date) -> BrokerOutcome {
        var outcome = self
        if outcome.reason != nil, outcome.failedAt == nil { outcome.failedAt = date }
        return outcome
    }

    var stored: TaskOutcome {
        guard result != .success else { return .completed(task, epoch: epoch) }
        var failed = task
        failed.lastFailure = failure
        return deadLetter ? .deadLettered(failed, epoch: epoch) : .failed(failed, pause: pause, epoch: epoch)
    }
}

extension TaskResult {
    /// Whether the handler sent the action to the dead letters.
    var isDeadLetter: Bool {
        if case .deadLetter = self { return true }
        return false
    }

    /// A failure as the handler reported it, in words.
    var failureReason: String? {
        switch self {
        case .success: nil
        case .retry(let after): after > .zero ? "the handler asked to retry after \(after)" : "the handler asked to retry at once"
        case .waitForRestart: "the handler asked to wait for a restart"
        case .deadLetter(let reason): reason
        }
    }
}

extension StoredTask {
    /// The number of the next attempt: `attempts + 1`, or `Int.max` for a count that cannot grow
    /// (a stored count is whatever the file says: it must not trap).
    package var nextAttempt: Int {
        attempts < Int.max ? attempts + 1 : Int.max
    }

    /// Whether `self` is the same version of the same action as `other` (the revision compared
    /// first: one integer, and it differs between any two saves).
    func isVersion(of other: StoredTask) -> Bool {
        revision == other.revision && key == other.key && collection == other.collection
    }
}

/// An action's identity: its collection and key.
struct BrokerActionID: Hashable, Sendable {
    let collection: String
    let key: String

    init(_ task: borrowing StoredTask) {
        collection = task.collection
        key = task.key
    }
}

/// A committed change that a broker applies to the queues it holds.
enum BrokerChange: Sendable {
    /// An action was saved (enqueued or replaced).
    case saved(BrokerEntry)
    /// An action was deleted (cancelled).
    case deleted(StoredTask)
    /// An action completed: a worker holding its queue's lease stored its success (shared backends).
    case completed(StoredTask)
    /// The pauses of these queues were cleared.
    case resumed([String])
    /// Every action of this queue was deleted.
    case purged(String)
    /// These queues changed in a way the broker cannot replay (another process wrote them): read
    /// them again.
    case reload([String])
    /// Any queue may have changed (another process's changes were missed): read again every queue
    /// the broker holds, and these stored ones. Only the stored queues would leave a queue emptied
    /// meanwhile (its actions deleted, or purged) as the broker knew it: it ran cancelled actions.
    case reloadEverything([String])
    /// The broker of this process that owned these queues stopped: a broker whose filter accepts
    /// them may take them now.
    case unowned([String])
    /// A worker of this broker's pool in another process has room and waits for queues that
    /// other workers hold (shared backends).
    case spareCapacityElsewhere(room: Int)
}

/// A decoded action, type-erased so that the state machine is not generic.
protocol BrokerActionBox: AnyObject, Sendable {
    /// Orders two actions of one queue (`sort`); both boxes come from the same engine.
    func order(before other: any BrokerActionBox) -> ComparisonResult
}

/// The box of an action of type `Action`.
final class TypedActionBox<Action: TaskQueueAction>: BrokerActionBox {
    let value: Action

    init(_ value: Action) {
        self.value = value
    }

    func order(before other: any BrokerActionBox) -> ComparisonResult {
        guard let other = other as? TypedActionBox<Action> else { return .orderedSame }
        return value.sort(other.value)
    }
}

extension BrokerEntry {
    /// Whether `self` runs before `other` in one queue: by `sort`, then by enqueue order.
    func runs(before other: BrokerEntry) -> Bool {
        if let left = action, let right = other.action {
            switch left.order(before: right) {
            case .orderedAscending: return true
            case .orderedDescending: return false
            case .orderedSame: break
            }
        }
        return task.position < other.task.position
    }

    /// Decodes a queue's stored actions (in position order) and sorts them in run order, the
    /// paused action first if there is one.
    static func decode<Action: TaskQueueAction>(
        _ tasks: [StoredTask], as _: Action.Type, since: Duration, decoder: JSONDecoder = JSONDecoder()
    ) -> [BrokerEntry] {
        var paused: BrokerEntry?
        var entries: [BrokerEntry] = []
        // The decoded actions of `entries`, still typed: compared without casts.
        var actions: [Action?] = []
        entries.reserveCapacity(tasks.count)
        actions.reserveCapacity(tasks.count)
        for task in tasks {
            let action = try? decoder.decode(Action.self, from: task.payload)
            let entry = BrokerEntry(task: task, action: action.map { TypedActionBox($0) }, since: since)
            if task.pause != nil && paused == nil {
                paused = entry
            } else {
                entries.append(entry)
                actions.append(action)
            }
        }
        // Whether entry `i` runs before entry `j`: by `sort`, then by enqueue order.
        func runs(_ i: Int, before j: Int) -> Bool {
            if let left = actions[i], let right = actions[j] {
                switch left.sort(right) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: break
                }
            }
            return entries[i].task.position < entries[j].task.position
        }
        // Usually already in run order (stored in enqueue order, and most actions sort as equal):
        // checked with one comparison per pair, and only sorted otherwise (stably: equal actions
        // keep enqueue order).
        if entries.indices.dropFirst().contains(where: { runs($0, before: $0 - 1) }) {
            let order = entries.indices.sorted { runs($0, before: $1) }
            entries = order.map { entries[$0] }
        }
        if let paused { entries.insert(paused, at: 0) }
        return entries
    }
}
