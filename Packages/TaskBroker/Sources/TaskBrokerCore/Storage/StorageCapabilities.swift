/// What a backend may do beyond ``TaskStorage``, each asked for by the engine with `as?` on the
/// protocol, never by naming a backend. A backend without a capability gets the engine's general
/// path.

/// A backend that reads many queues in one pass and reports each queue as soon as it is read
/// (and a failure per queue), instead of in chunks through ``TaskStorage/tasks(inQueues:)``.
package protocol BatchQueueReading: TaskStorage {
    /// Reads `queueNames` (the first `limit` actions of each in enqueue order after its position
    /// in `positions`, if any; all of them for a `nil` limit), calling `body` once per queue read
    /// (in no particular order) and `failed` for a queue whose rows do not decode; queues with
    /// nothing stored are not reported.
    ///
    /// - Throws: ``TaskBrokerError`` when the read as a whole fails; the queues not reported by
    ///   then were not read.
    func readQueues(
        _ queueNames: [String], after positions: [String: Int64], limit: Int?,
        failed: @escaping @Sendable (String, TaskBrokerError) -> Void,
        _ body: @escaping @Sendable (String, [StoredTask]) -> Void
    ) async throws
}

/// A backend that stores outcomes with a blocking call, from a thread of its own: a commit then
/// costs no executor hops, and a blocking fsync never runs on Swift's cooperative pool.
package protocol BlockingOutcomeStore: TaskStorage {
    /// Stores outcomes in one transaction, blocking the calling thread (see ``TaskStorage/finish(_:owner:)``;
    /// such a backend has no leases).
    func finishBlocking(_ outcomes: [TaskOutcome]) throws -> TaskFinishReport
}

/// A backend whose queues one process runs (the embedded SQLite backend: a file lock per broker
/// name keeps other processes' brokers of the name out), so a broker starts heads without
/// claiming them. Every other backend is asked to claim each head first.
package protocol UnclaimedHeads: TaskStorage {}

/// A backend that the processes of one machine share without a change feed (the embedded SQLite
/// file): a broker keeps brokers of its name in other processes out with a lock of the machine,
/// learns of other processes' commits from a watcher, and announces its own commits to this
/// process's brokers from the commit itself, in commit order (``DatabaseHub/publish(_:)``), so
/// `TaskDatabase` does not announce them again after the write returns.
package protocol MachineLocalStorage: TaskStorage {
    /// What every `TaskDatabase` on this store in this process shares (the same hub for every
    /// store opened on the same file).
    var hub: DatabaseHub { get }

    /// Locks `claim`'s name against brokers of other processes, fails if one of them runs a broker
    /// whose queues overlap it, and starts watching for other processes' commits.
    ///
    /// - Returns: What gives the lock and the watcher back; called once.
    /// - Throws: ``TaskBrokerError`` `.queueAlreadyClaimed` when another process runs such a
    ///   broker, `.storageFailed` when the lock or the watcher cannot be had; nothing is held then.
    func lockBroker(_ claim: BrokerClaim) async throws -> @Sendable () -> Void

    /// Starts watching for other processes' commits (``DatabaseHub/retainWatcher(_:)``), for a
    /// listener of `TaskDatabase.queueChanges()`.
    ///
    /// - Returns: What stops watching once no one else needs it; called once.
    /// - Throws: ``TaskBrokerError`` `.storageFailed` when the watcher cannot start.
    func watchOtherProcesses() async throws -> @Sendable () -> Void
}

/// What tells the other processes of a ``MachineLocalStorage`` that this process committed.
package protocol CommitSignal: Sendable {
    /// Signals a commit; best effort (a failure only delays the other processes until the next).
    func signal()
}

/// A watcher of other processes' commits that ``DatabaseHub`` keeps while anyone listens.
package protocol ExternalChangeWatching: Sendable {
    /// Stops watching.
    func cancel()
}
