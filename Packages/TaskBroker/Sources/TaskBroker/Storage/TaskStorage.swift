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
    public init(
        key: String, collection: String, queueName: String, payload: Data,
        position: Int64, revision: Int64, attempts: Int = 0, pause: TaskPause? = nil,
        notBefore: Date? = nil, priority: Int = 0, lastFailure: TaskFailure? = nil
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
    public init(key: String, collection: String, queueName: String, payload: Data, notBefore: Date? = nil, priority: Int = 0) {
        self.key = key.normalizedName
        self.collection = collection.normalizedName
        self.queueName = queueName.normalizedName
        self.payload = payload
        self.notBefore = notBefore
        self.priority = priority
    }
}

/// What became of an action that a broker ran, to be stored by ``TaskStorage/finish(_:owner:)``.
public enum TaskOutcome: Sendable, Hashable {
    /// The action succeeded: delete it, if its revision is still the stored one.
    case completed(StoredTask)
    /// The action failed: count the attempt, store `pause` (`nil` to run it again at once) and the
    /// task's ``StoredTask/lastFailure``, if its revision is still the stored one.
    case failed(StoredTask, pause: TaskPause?)
}

/// The storage operations a ``TaskQueueBroker`` needs: the backend interface of ``TaskDatabase``.
///
/// The SQLite backend (``TaskDatabase/sqlite(path:configuration:)``) is the embedded default.
/// Every backend passes the conformance suite in the `TaskBrokerTesting` product.
///
/// A broker works on queues it owns: it reads a queue's actions (``tasks(inQueue:)``), picks
/// the head by the action type's `sort`, claims it (``claim(_:owner:leaseDuration:)``), runs it and
/// stores the outcome (``finish(_:owner:)``). For a backend shared by several processes the claim
/// is a lease on the queue that the `owner` holds for `leaseDuration` and renews with every
/// claim; the embedded SQLite backend serves one process and only checks that the claimed
/// revision is still stored.
public protocol TaskStorage: Sendable {
    /// Enqueues actions in one transaction. An action whose key and collection are already
    /// stored replaces the stored one: it keeps its position, gets a new revision, its not-before
    /// time and priority, and its attempts, pause and last failure are cleared.
    ///
    /// - Parameter tasks: The actions to store.
    /// - Returns: The stored versions, in the order given.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func save(_ tasks: [NewTask]) async throws -> [StoredTask]

    /// Deletes an action (cancels it).
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: The deleted action, or `nil` if none was stored.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func delete(key: String, collection: String) async throws -> StoredTask?

    /// The names of every queue that has stored actions, sorted.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func queueNames() async throws -> [String]

    /// The names of the queues that have stored actions, sorted as the backend orders names, after
    /// `name` (from the first for `nil`), at most `limit` of them: a broker lists its queues a page
    /// at a time, as it runs out of queues to read. The default filters ``queueNames()``; a backend
    /// with an index on the queue name skips from one name to the next through it.
    ///
    /// - Parameters:
    ///   - name: The name the page starts after.
    ///   - limit: The most names returned (at least 1).
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func queueNames(after name: String?, limit: Int) async throws -> [String]

    /// Every stored action of a queue, in enqueue order.
    ///
    /// - Parameter queueName: The queue.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func tasks(inQueue queueName: String) async throws -> [StoredTask]

    /// Claims the heads a broker is about to run, one per queue.
    ///
    /// - Parameters:
    ///   - heads: The actions to run, at most one per queue.
    ///   - owner: A name unique to the claiming broker.
    ///   - leaseDuration: How long a lease on each queue lasts unless renewed (shared backends
    ///     that do not set their own).
    /// - Returns: For each head, in order: ``TaskClaimResult/granted`` when it may run,
    ///   ``TaskClaimResult/changed`` when its revision is gone, changed or paused,
    ///   ``TaskClaimResult/heldElsewhere(until:)`` when another owner holds its queue's lease.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [TaskClaimResult]

    /// Stores the outcomes of finished actions, all in one transaction, and releases their claims.
    ///
    /// Each outcome applies only if the action's revision is still the stored one: a deleted or
    /// re-saved action is left as it is. On a shared backend it applies only if `owner` still
    /// holds the queue's lease under the epoch of its claim: an outcome from a worker whose lease
    /// was taken over changes nothing.
    ///
    /// - Parameters:
    ///   - outcomes: What became of each action.
    ///   - owner: The broker that ran them.
    /// - Returns: Which outcomes were not stored, and why. A backend may leave out a completion
    ///   whose action was gone (the embedded one does), but not a failure: a broker keeps a failed
    ///   action as its queue's head, and would run an action deleted by another process again.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`; nothing is stored then.
    @discardableResult
    func finish(_ outcomes: [TaskOutcome], owner: String) async throws -> TaskFinishReport

    /// Stores outcomes like ``finish(_:owner:)`` and, in the same transaction, claims the next head
    /// of each queue whose action completed (shared backends): the lease is kept instead of being
    /// released, so the broker starts that head without a claim of its own. A kept lease keeps its
    /// epoch (the holder does not change) and has at least eleven twelfths of `leaseDuration` left
    /// when the transaction commits: a backend extends a shorter one to a full lease.
    ///
    /// A next head is claimed only if the completion was stored, `owner` held the queue's lease, and
    /// the head is still stored as given (same revision and attempts, not paused). The change feed
    /// need not report a completion whose next head was claimed: its queue stays held, and a worker
    /// that holds it in memory finds the head gone when it next claims the queue. The default, for
    /// backends without leases, claims nothing and calls ``finish(_:owner:)``.
    ///
    /// - Parameters:
    ///   - outcomes: What became of each action.
    ///   - nextHeads: For queues whose outcome is a completion, the head the broker would run next, by queue name.
    ///   - owner: The broker that ran them.
    ///   - leaseDuration: How long the lease on a claimed next head lasts (backends that do not set their own).
    /// - Returns: What ``finish(_:owner:)`` returns, with ``TaskFinishReport/continued`` naming the
    ///   queues whose next head was claimed.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`; nothing is stored then.
    @discardableResult
    func finish(
        _ outcomes: [TaskOutcome], claimingNext nextHeads: [String: StoredTask], owner: String, leaseDuration: Duration
    ) async throws -> TaskFinishReport

    /// Clears the pause of every action in the given queues.
    ///
    /// - Parameter queueNames: The queues to resume.
    /// - Returns: The actions whose pause was cleared.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func resume(queues queueNames: [String]) async throws -> [StoredTask]

    /// Deletes every action of a queue.
    ///
    /// - Parameter queueName: The queue.
    /// - Returns: The number of deleted actions.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func purge(queue queueName: String) async throws -> Int

    /// The stored state of every queue that has actions, sorted by name.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func snapshot() async throws -> [TaskQueueSnapshot]

    /// Every stored action of several queues, in enqueue order per queue (queues without actions
    /// are absent). The default asks ``tasks(inQueue:)`` for each queue in turn.
    ///
    /// - Parameter queueNames: The queues.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func tasks(inQueues queueNames: [String]) async throws -> [String: [StoredTask]]

    /// The first `limit` stored actions of each of several queues whose position is after the
    /// given one (from the queue's start for a queue absent from `positions`), in enqueue order
    /// (queues without such actions are absent): what a broker reads ahead of the heads it runs,
    /// so that the memory and the time of a read do not grow with a queue's backlog. The default
    /// reads whole queues through ``tasks(inQueues:)`` and keeps those actions; a backend with an
    /// index on queue and position reads only them.
    ///
    /// - Parameters:
    ///   - queueNames: The queues.
    ///   - positions: Per queue, the position the actions returned come after.
    ///   - limit: The most actions returned per queue (at least 1).
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func tasks(inQueues queueNames: [String], after positions: [String: Int64], limit: Int) async throws -> [String: [StoredTask]]

    /// The changes every process commits, for a backend shared by several processes; `nil` (the
    /// default) for a backend whose changes are all made through this process's ``TaskDatabase``.
    ///
    /// When this returns, the backend already listens: a change committed from then on is in the
    /// stream. A backend that loses its listening connection re-establishes it and then yields
    /// ``TaskStorageChange/queuesChanged(_:)`` for every stored queue (a catch-up scan). Cancelling
    /// the stream's consumer stops listening.
    ///
    /// With a change feed, ``TaskDatabase`` delivers changes to its brokers only through it, so
    /// every process sees every commit the same way.
    ///
    /// - Throws: ``TaskBrokerError`` when listening cannot start.
    func changes() async throws -> AsyncStream<[TaskStorageChange]>?

    /// Whether several processes share this backend: claims are leases with a fencing epoch, and
    /// every change reaches the brokers through ``changes()``. `false` by default.
    var isShared: Bool { get }

    /// The lease a shared backend grants on a claim, when the backend sets it (`nil`, the default:
    /// the broker's ``TaskQueueBroker/Configuration/leaseDuration``). A broker renews the leases of
    /// its running actions every third of it.
    var leaseDuration: Duration? { get }

    /// Extends the leases `owner` holds on queues whose action still runs (shared backends).
    ///
    /// - Parameters:
    ///   - queueNames: The queues whose actions run.
    ///   - owner: The broker that claimed them.
    ///   - leaseDuration: How long each lease lasts from now.
    /// - Returns: The queues whose lease `owner` no longer holds (another worker took them over);
    ///   empty for a backend without leases (the default).
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`; the broker tries again a twelfth
    ///   of the lease later. A renewal should give up within a quarter of the lease, so that the
    ///   next try still comes before the lease ends.
    func renew(_ queueNames: [String], owner: String, leaseDuration: Duration) async throws -> [String]

    /// Lets go of leases `owner` was granted by its last claim of these queues and will not use
    /// (shared backends): the broker stopped while the claim ran. Other workers may claim the
    /// queues at once instead of waiting for the leases to expire. A lease `owner` no longer holds
    /// under that claim (taken over, or claimed again since) is left alone.
    ///
    /// - Parameters:
    ///   - queueNames: The queues whose heads the broker will not run.
    ///   - owner: The broker that claimed them.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`; the leases then expire as usual.
    func release(_ queueNames: [String], owner: String) async throws

    /// Tells the other workers of a pool that this one has room and waits for queues they hold
    /// (shared backends): it delivers ``TaskStorageChange/spareCapacity(pool:room:)`` to the
    /// change feeds of every other process. A worker that hears it and has more ready queues than
    /// it can run lets up to `room` of them go with their outcomes, instead of keeping them.
    ///
    /// - Parameters:
    ///   - pool: The name of the brokers that share the work.
    ///   - room: How many more queues this worker could run now.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`; the broker asks again later.
    func announceSpareCapacity(pool: String, room: Int) async throws
}

/// A backend's answer to the claim of one head (``TaskStorage/claim(_:owner:leaseDuration:)``).
public enum TaskClaimResult: Sendable, Hashable {
    /// The head may run: the claimant holds its queue (its lease, on a shared backend).
    case granted
    /// The head is gone, was replaced, or failed and paused since it was read: read the queue again.
    case changed
    /// Another worker holds the queue's lease until about this date (on this machine's clock):
    /// try again then, or earlier if the queue changes.
    case heldElsewhere(until: Date)
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
}

/// A shared backend that keeps the names of the brokers that every process runs on it, so that
/// brokers whose names are prefixes of each other ("mail" and "mailer") are refused across
/// processes as they are within one: a broker claims the queues whose names start with its own,
/// and two such brokers with different action types would take each other's queues. Brokers of
/// the same name are workers of one pool and are never refused. Filter brokers are not compared
/// (a filter cannot be read from another process). The SQLite backend keeps brokers apart with
/// file locks instead.
public protocol SharedBrokerNames: TaskStorage {
    /// Records a broker set up on this storage.
    ///
    /// - Parameters:
    ///   - name: The broker's name.
    ///   - claimsPrefix: Whether it claims the queues whose names start with `name` (`false`: a filter).
    /// - Throws: ``TaskBrokerError`` with code `.queueAlreadyClaimed` when a running broker of
    ///   another name, in any process, claims a prefix of `name` or a name that starts with it;
    ///   `.storageFailed`.
    func registerBroker(name: String, claimsPrefix: Bool) async throws

    /// Forgets a broker that shut down (best effort: a record left behind expires on its own).
    ///
    /// - Parameter name: The broker's name.
    func unregisterBroker(name: String) async
}
