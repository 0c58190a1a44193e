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
