public import Foundation

/// Why a stored action is not run right now.
public enum TaskPause: Sendable, Hashable {
    /// A timed retry: the action runs again at this wall-clock time.
    case until(Date)
    /// The action waits for ``TaskQueueBroker/restartQueues(_:)`` (or ``TaskDatabase/restartQueues(_:)``).
    case untilRestart
}

/// A failed run of a stored action: why, and when.
public struct TaskFailure: Sendable, Hashable {
    /// What failed, in words (for an operator; not parsed).
    public var reason: String
    /// When the run failed (wall clock).
    public var failedAt: Date

    /// Creates a failure record.
    ///
    /// - Parameters:
    ///   - reason: What failed, in words.
    ///   - failedAt: When the run failed.
    public init(reason: String, failedAt: Date) {
        self.reason = reason
        self.failedAt = failedAt
    }
}

/// An action as a ``TaskStorage`` backend keeps it: its encoded form plus its queue state.
public struct StoredTask: Sendable, Hashable {
    /// The action's key, unique within its collection.
    public var key: String
    /// The action's collection.
    public var collection: String
    /// The queue that runs the action.
    public var queueName: String
    /// The action, JSON-encoded.
    public var payload: Data
    /// The enqueue order: smaller runs first among actions that `sort` as the same. Kept when an
    /// action is replaced by a save with the same key and collection.
    public var position: Int64
    /// Changes with every save of this key and collection; a completion applies only to the
    /// revision that ran.
    public var revision: Int64
    /// How many times the action has failed.
    public var attempts: Int
    /// Why the action is held back, or `nil` when it may run. At most one action of a queue is paused,
    /// and while it is, the whole queue waits for it.
    public var pause: TaskPause?
    /// The earliest time the action may start, as saved (`nil`: at once).
    public var notBefore: Date?
    /// The priority it was saved with (larger runs first; 0 by default).
    public var priority: Int
    /// The last failed run, if the action has failed since it was saved.
    public var lastFailure: TaskFailure?
    /// The trace context of its save: the propagation headers of the application's instrument
    /// (empty without one). Its runs are spans of that trace.
    public var traceContext: [String: String]

    /// Creates a stored action.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    ///   - queueName: The queue that runs the action.
    ///   - payload: The encoded action.
    ///   - position: The enqueue order.
    ///   - revision: The save that produced this version.
    ///   - attempts: How many times the action has failed.
    ///   - pause: Why the action is held back, if it is.
    ///   - notBefore: The earliest time the action may start.
    ///   - priority: The priority it was saved with.
    ///   - lastFailure: Its last failed run.
    ///   - traceContext: The trace context of its save.
    public init(
        key: String, collection: String, queueName: String, payload: Data,
        position: Int64, revision: Int64, attempts: Int = 0, pause: TaskPause? = nil,
        notBefore: Date? = nil, priority: Int = 0, lastFailure: TaskFailure? = nil, traceContext: [String: String] = [:]
    ) {
        self.key = key
        self.collection = collection
        self.queueName = queueName
        self.payload = payload
        self.position = position
        self.revision = revision
        self.attempts = attempts
        self.pause = pause
        self.notBefore = notBefore
        self.priority = priority
        self.lastFailure = lastFailure
        self.traceContext = traceContext
    }
}

/// A stored action's place on the schedule (``TaskStorage/scheduled(after:through:limit:)``):
/// its queue, its not-before time and its enqueue order.
public struct TaskScheduleEntry: Sendable, Hashable, Comparable {
    /// The queue that runs the action.
    public var queueName: String
    /// The earliest time the action may start.
    public var notBefore: Date
    /// The action's enqueue order.
    public var position: Int64

    /// Creates a schedule entry.
    ///
    /// - Parameters:
    ///   - queueName: The queue that runs the action.
    ///   - notBefore: The earliest time the action may start.
    ///   - position: The action's enqueue order.
    public init(queueName: String, notBefore: Date, position: Int64) {
        self.queueName = queueName
        self.notBefore = notBefore
        self.position = position
    }

    /// By not-before time, then by position.
    public static func < (lhs: TaskScheduleEntry, rhs: TaskScheduleEntry) -> Bool {
        (lhs.notBefore, lhs.position) < (rhs.notBefore, rhs.position)
    }
}

/// An action to enqueue: what a backend needs to store it.
public struct NewTask: Sendable, Hashable {
    /// The action's key.
    public var key: String
    /// The action's collection.
    public var collection: String
    /// The queue that runs the action.
    public var queueName: String
    /// The action, JSON-encoded.
    public var payload: Data
    /// The earliest time the action may start (`nil`: at once).
    public var notBefore: Date?
    /// The action's priority (larger runs first; 0 by default).
    public var priority: Int
    /// The trace context to store with it (the propagation headers of the application's
    /// instrument; empty without one).
    public var traceContext: [String: String]

    /// Creates an action to enqueue. The key, the collection and the queue name are stored in
    /// Unicode Normalization Form C (Swift's `==` holds for their other spellings too).
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    ///   - queueName: The queue that runs the action.
    ///   - payload: The encoded action.
    ///   - notBefore: The earliest time the action may start.
    ///   - priority: The action's priority.
    ///   - traceContext: The trace context to store with it.
    public init(
        key: String, collection: String, queueName: String, payload: Data, notBefore: Date? = nil, priority: Int = 0,
        traceContext: [String: String] = [:]
    ) {
        self.key = key.normalizedName
        self.collection = collection.normalizedName
        self.queueName = queueName.normalizedName
        self.payload = payload
        self.notBefore = notBefore
        self.priority = priority
        self.traceContext = traceContext
    }
}

/// What became of an action that a broker ran, to be stored by ``TaskStorage/finish(_:owner:)``.
///
/// Each outcome carries the fencing epoch of the lease its action ran under, as the claim granted
/// it (``TaskClaimResult/granted(epoch:)``; `0` on a backend without leases): a shared backend
/// stores it only if the broker still holds the queue's lease under that epoch.
public enum TaskOutcome: Sendable, Hashable {
    /// The action succeeded: delete it, if its revision is still the stored one.
    case completed(StoredTask, epoch: Int64 = 0)
    /// The action failed: count the attempt, store `pause` (`nil` to run it again at once) and the
    /// task's ``StoredTask/lastFailure``, if its revision is still the stored one.
    case failed(StoredTask, pause: TaskPause?, epoch: Int64 = 0)
    /// The action failed for the last time: count the attempt, store the task's
    /// ``StoredTask/lastFailure`` and move it to the dead letters (its queue goes on without it),
    /// if its revision is still the stored one.
    case deadLettered(StoredTask, epoch: Int64 = 0)

    /// The action the outcome is about.
    public var task: StoredTask {
        switch self {
        case .completed(let task, _), .failed(let task, _, _), .deadLettered(let task, _): task
        }
    }

    /// The epoch of the lease the action ran under (`0` on a backend without leases).
    public var epoch: Int64 {
        switch self {
        case .completed(_, let epoch), .failed(_, _, let epoch), .deadLettered(_, let epoch): epoch
        }
    }

    /// The same outcome under the lease `epoch` (for a storage that forwards outcomes, or a test
    /// that claims a head itself).
    public func under(epoch: Int64) -> TaskOutcome {
        switch self {
        case .completed(let task, _): .completed(task, epoch: epoch)
        case .failed(let task, let pause, _): .failed(task, pause: pause, epoch: epoch)
        case .deadLettered(let task, _): .deadLettered(task, epoch: epoch)
        }
    }
}

/// A backend's answer to the claim of one head (``TaskStorage/claim(_:owner:leaseDuration:)``).
public enum TaskClaimResult: Sendable, Hashable {
    /// The head may run: the claimant holds its queue (its lease, on a shared backend, under this
    /// fencing epoch; `0` on a backend without leases). The broker hands the epoch back with the
    /// action's outcome (``TaskOutcome/epoch``), its renewals and its release (``TaskQueueLease``).
    case granted(epoch: Int64 = 0)
    /// The head is gone, was replaced, or failed and paused since it was read: read the queue again.
    case changed
    /// Another worker holds the queue's lease until about this date (on this machine's clock):
    /// try again then, or earlier if the queue changes.
    case heldElsewhere(until: Date)

    /// The epoch of the lease granted, or `nil` if the claim was not granted.
    public var grantedEpoch: Int64? {
        if case .granted(let epoch) = self { epoch } else { nil }
    }
}

/// A queue's lease as a broker holds it: the queue and the fencing epoch its claim was granted
/// under (``TaskClaimResult/granted(epoch:)``). Renewals and releases name leases so: a lease the
/// broker no longer holds under that epoch (another worker took the queue over, or this one
/// claimed it again since) is left alone.
public struct TaskQueueLease: Sendable, Hashable {
    /// The queue.
    public var queueName: String
    /// The epoch its claim was granted under.
    public var epoch: Int64

    /// Creates a lease.
    ///
    /// - Parameters:
    ///   - queueName: The queue.
    ///   - epoch: The epoch its claim was granted under.
    public init(queueName: String, epoch: Int64) {
        self.queueName = queueName
        self.epoch = epoch
    }
}

/// What ``TaskStorage/finish(_:owner:)`` did not store, by queue.
public struct TaskFinishReport: Sendable, Hashable {
    /// Queues whose outcome was refused because the claimant no longer holds their lease: another
    /// worker took them over (its epoch is newer).
    public var fenced: Set<String>
    /// Queues whose action was deleted or replaced before its outcome arrived: nothing was stored
    /// for it.
    public var outdated: Set<String>
    /// Queues whose completion was stored and whose next head was claimed in the same transaction
    /// (``TaskStorage/finish(_:claimingNext:owner:leaseDuration:)``): the claimant still holds
    /// their lease, under the same epoch.
    public var continued: Set<String>

    /// Creates a report.
    ///
    /// - Parameters:
    ///   - fenced: Queues whose outcome the lease's epoch refused.
    ///   - outdated: Queues whose action was deleted or replaced meanwhile.
    ///   - continued: Queues whose next head was claimed with the outcome.
    public init(fenced: Set<String> = [], outdated: Set<String> = [], continued: Set<String> = []) {
        self.fenced = fenced
        self.outdated = outdated
        self.continued = continued
    }
}

/// A change that a shared backend reports (``TaskStorage/changes()``), committed by any process.
public enum TaskStorageChange: Sendable, Hashable {
    /// The stored actions of these queues changed (saved, deleted, failed, resumed or purged):
    /// read them again.
    case queuesChanged([String])
    /// These queues' pauses were cleared (``TaskStorage/resume(queues:)``): their brokers report
    /// `TaskBrokerEvent.resumed` and run their heads again. A backend reports them together with
    /// ``queuesChanged(_:)`` for the same queues, which listeners that know nothing of this case
    /// read again.
    case queuesResumed([String])
    /// These actions completed and were deleted (only `queueName`, `key`, `collection` and
    /// `revision` are meaningful). Their worker let their queues go.
    case completed([StoredTask])
    /// A worker of the pool named `pool` in another process has room and waits for queues that
    /// other workers hold, and could run `room` more queues
    /// (``TaskStorage/announceSpareCapacity(pool:room:)``).
    case spareCapacity(pool: String, room: Int)
    /// Plain parallel actions of these queues were saved or made ready again
    /// (``ParallelTaskStorage``): brokers whose scope holds them claim some.
    case parallelReady([String])
}

/// A stored action found by its key and collection (``TaskStorage/lookup(key:collection:)``).
public enum TaskLookup: Sendable, Hashable {
    /// In its queue: waiting, paused or running.
    case live(StoredTask)
    /// A dead letter: failed for the last time, run again only when replayed.
    case deadLetter(StoredTask)

    /// The stored action.
    public var task: StoredTask {
        switch self {
        case .live(let task), .deadLetter(let task): task
        }
    }
}
