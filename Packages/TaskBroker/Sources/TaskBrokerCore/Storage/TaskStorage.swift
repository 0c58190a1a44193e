public import Foundation

/// The storage operations a ``TaskQueueBroker`` needs: the backend interface of ``TaskDatabase``.
///
/// The SQLite backend (`TaskDatabase.sqlite(path:configuration:)`, module TaskBrokerSQLite) is the embedded default.
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

    /// Enqueues an action only if no action with its key and collection is stored (ready or a
    /// dead letter), atomically: of several processes saving the same key at once, one stores it.
    /// The default throws `.unsupported`.
    ///
    /// - Parameter task: The action to store.
    /// - Returns: The stored version, or `nil` when an action with that key and collection was stored.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func saveIfAbsent(_ task: NewTask) async throws -> StoredTask?

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
    /// - Returns: For each head, in order: ``TaskClaimResult/granted(epoch:)`` when it may run (with
    ///   the lease's epoch, which the broker hands back with the outcome),
    ///   ``TaskClaimResult/changed`` when its revision is gone, changed or paused,
    ///   ``TaskClaimResult/heldElsewhere(until:)`` when another owner holds its queue's lease.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [TaskClaimResult]

    /// Stores the outcomes of finished actions, all in one transaction, and releases their claims.
    ///
    /// Each outcome applies only if the action's revision is still the stored one: a deleted or
    /// re-saved action is left as it is. On a shared backend it applies only if `owner` still
    /// holds the queue's lease under the outcome's epoch (``TaskOutcome/epoch``, the one its claim
    /// was granted): an outcome from a worker whose lease was taken over changes nothing.
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

    /// The stored actions (not dead letters) whose not-before time comes after `cursor` in
    /// (not-before, position) order (from the first for `nil`) and is no later than `through`, at
    /// most `limit` of them, in that order: the queues a broker wakes up when their time comes.
    /// The default reads every queue whole; a backend with an index on not-before and position
    /// reads only these.
    ///
    /// - Parameters:
    ///   - cursor: The entry the page starts after.
    ///   - through: The latest not-before time returned.
    ///   - limit: The most entries returned (at least 1).
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func scheduled(after cursor: TaskScheduleEntry?, through: Date, limit: Int) async throws -> [TaskScheduleEntry]

    /// The earliest not-before time of a stored action (not a dead letter) that is later than
    /// `date`, or `nil` when none is: when a broker next wakes up. The default reads every queue
    /// whole; a backend with an index on not-before reads one entry of it.
    ///
    /// - Parameter date: The time the answer is after.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func nextNotBefore(after date: Date) async throws -> Date?

    /// The dead letters (actions that failed for the last time, see ``TaskOutcome/deadLettered(_:epoch:)``)
    /// of one queue, or of every queue for `nil`, by queue name and position. The default throws
    /// `.unsupported`.
    ///
    /// - Parameter queueName: The queue, or `nil` for all.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func deadLetters(queueName: String?) async throws -> [StoredTask]

    /// Puts a dead letter back in its queue, at its place (its position), as a new save: a new
    /// revision, attempts from zero, no pause, no failure on record. Brokers hear of it as of a save.
    /// The default throws `.unsupported`.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: The action as stored now, or `nil` when no dead letter has that key and collection.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func replayDeadLetter(key: String, collection: String) async throws -> StoredTask?

    /// Deletes a dead letter. The default throws `.unsupported`.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: The deleted dead letter, or `nil` when no dead letter has that key and collection.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func discardDeadLetter(key: String, collection: String) async throws -> StoredTask?

    /// The stored action with this key and collection, live or a dead letter (an action whose
    /// completion is stored is not). The default throws `.unsupported`.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: The action and whether it is a dead letter, or `nil` when none is stored.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func lookup(key: String, collection: String) async throws -> TaskLookup?

    /// Records the schedules a scheduler runs: each one's recurrence, described, and next tick.
    /// A schedule not yet stored is added with no last tick; a stored one keeps its last tick.
    func registerSchedules(_ schedules: [TaskScheduleState]) async throws

    /// Records `tick` as schedule `name`'s last tick and saves `task` unless an action with its
    /// key and collection is stored (as ``saveIfAbsent(_:)``), in one transaction; does nothing
    /// when the recorded last tick is `tick` or later. Of several processes recording the same
    /// tick at once, one records it: each tick is enqueued once.
    ///
    /// - Parameters:
    ///   - name: The schedule's name.
    ///   - tick: The tick.
    ///   - next: The schedule's tick after this one (listed by ``schedules()``).
    ///   - task: The tick's action.
    /// - Returns: What was done.
    func recordTick(schedule name: String, tick: Date, next: Date?, task: NewTask) async throws -> TaskTickRecord

    /// The stored schedules, by name.
    func schedules() async throws -> [TaskScheduleState]

    /// Records up to `count` action starts in a rate limit's bucket, as many as keep at most
    /// `limit` starts in any window of `period` ending now, in one transaction (of several
    /// processes asking at once, each sees the others' starts).
    ///
    /// - Parameters:
    ///   - bucket: The bucket (a limit's prefix, or one queue of it).
    ///   - limit: At most this many starts per window.
    ///   - period: The window.
    ///   - count: How many starts are asked for.
    ///   - now: The caller's wall-clock time; a shared backend counts by its server's clock instead.
    /// - Returns: How many were recorded, and when fewer: how long until the oldest leaves the window.
    func acquireStarts(bucket: String, limit: Int, period: Duration, count: Int, now: Date) async throws -> TaskRateGrant

    /// Gives back up to `count` starts recorded in `bucket` at `at` (a grant's time) that did not
    /// happen: they no longer count against the limit.
    func releaseStarts(bucket: String, at: Date, count: Int) async throws

    /// The starts each rate limit's bucket counts now: those recorded and not yet out of their
    /// windows, by bucket name. The default (a backend without rate limits) has none.
    ///
    /// - Parameter now: The caller's wall-clock time; a shared backend counts by its server's clock instead.
    func rateLimitUsage(now: Date) async throws -> [TaskRateUsage]

    /// The brokers that hold leases or registrations on this database now, by owner, each with the
    /// queues it holds. The default (a backend without leases, such as an SQLite file, whose
    /// brokers share one machine's file locks) has none.
    func workers() async throws -> [TaskWorker]

    /// Pauses queues for an operator (`paused` true) or resumes them: a paused queue starts
    /// nothing, in every process, across restarts, until resumed; saves into it are kept. Brokers
    /// hear of the queues whose mark changed as of a change to them. The default throws `.unsupported`.
    ///
    /// - Parameters:
    ///   - paused: Whether the queues are paused.
    ///   - queueNames: The queues (they need no stored action).
    /// - Returns: The queues whose mark changed.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func setPaused(_ paused: Bool, queues queueNames: [String]) async throws -> [String]

    /// The queues among `queueNames` (every queue for `nil`) that an operator paused. The
    /// default: none.
    ///
    /// - Parameter queueNames: The queues asked about, or `nil` for all.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func pausedQueues(among queueNames: [String]?) async throws -> Set<String>

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

    /// Extends the leases `owner` holds on queues whose action still runs (shared backends), each
    /// only under the epoch its claim was granted.
    ///
    /// A lease released since (its outcome stored) but still `owner`'s under that epoch is renewed
    /// too, and is not reported: the broker, which knows it let that lease go, releases it again.
    ///
    /// - Parameters:
    ///   - leases: The leases of the queues whose actions run.
    ///   - owner: The broker that claimed them.
    ///   - leaseDuration: How long each lease lasts from now.
    /// - Returns: The leases `owner` no longer holds under their epochs (another worker took those
    ///   queues over); empty for a backend without leases (the default).
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`; the broker tries again a twelfth
    ///   of the lease later. A renewal should give up within a quarter of the lease, so that the
    ///   next try still comes before the lease ends.
    func renew(_ leases: [TaskQueueLease], owner: String, leaseDuration: Duration) async throws -> [TaskQueueLease]

    /// Lets go of leases `owner` was granted and will not use (shared backends): the broker
    /// stopped while the claim ran, or a renewal extended a lease that an outcome had released.
    /// Other workers may claim the queues at once instead of waiting for the leases to expire. A
    /// lease `owner` no longer holds under its epoch (taken over, or claimed again since) is left
    /// alone.
    ///
    /// - Parameters:
    ///   - leases: The leases to let go, each with the epoch its claim was granted.
    ///   - owner: The broker that claimed them.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`; the leases then expire as usual.
    func release(_ leases: [TaskQueueLease], owner: String) async throws

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
