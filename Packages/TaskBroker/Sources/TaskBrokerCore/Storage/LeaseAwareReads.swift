public import Foundation

/// A shared backend whose read of a queue that another worker holds returns its head alone, with
/// the time that lease ends. The broker waits for the lease (or for the holder to let the queue
/// go) before it claims the head, and reads on once the queue is its own, instead of reading and
/// decoding a read-ahead of every queue that another worker of the pool runs, and claiming it to
/// be refused. The engine asks for it with `as?`; a backend without it has
/// its queues read with ``TaskStorage/tasks(inQueues:after:limit:)``.
public protocol LeaseAwareReads: TaskStorage {
    /// The first `limit` stored actions of each of `queueNames` in enqueue order (as
    /// ``TaskStorage/tasks(inQueues:after:limit:)`` reads them from the start), except that a queue
    /// whose lease an owner other than `owner` holds and has not let expire gives its head alone
    /// and is named in ``LeaseAwareRead/heldElsewhere`` with the time its lease ends (more of it
    /// may be stored); and which of `queueNames` an operator paused (``LeaseAwareRead/paused``, as
    /// ``TaskStorage/pausedQueues(among:)`` answers, in the same snapshot as the actions).
    ///
    /// With a `claimBudget` above zero, the read also takes the lease of up to that many of the
    /// queues, in the order given, as ``TaskStorage/claim(_:owner:leaseDuration:)`` would for their
    /// heads: only a queue whose lease no owner holds (not even `owner`: a lease the reader holds
    /// is in use), that no operator paused, and whose head (the first action read) is neither
    /// paused nor saved to run after `now`. Each is named in ``LeaseAwareRead/claimed`` with the
    /// lease's new epoch. A broker starting beside other workers then does not read and decode
    /// what another worker is about to run, nor claim it to be refused.
    ///
    /// - Parameters:
    ///   - queueNames: The queues to read.
    ///   - limit: How many actions to read of each queue another owner does not hold.
    ///   - owner: The lease holder that reads (its own leases do not cut a read short).
    ///   - claimBudget: How many of the queues' leases the read may take (`0`: none).
    ///   - leaseDuration: How long a lease taken lasts unless renewed.
    ///   - now: The reader's time: a head saved to run after it is not claimed.
    /// - Returns: The actions read, which queues gave their head alone, which are paused, and
    ///   which leases the read took.
    /// - Throws: ``TaskBrokerError`` when the read fails; nothing was read, and no lease taken, then.
    func tasks(
        inQueues queueNames: [String], limit: Int, readingFor owner: String, claimBudget: Int, leaseDuration: Duration, now: Date
    ) async throws -> LeaseAwareRead
}

extension LeaseAwareReads {
    /// The read of ``tasks(inQueues:limit:readingFor:claimBudget:leaseDuration:now:)`` that takes no lease.
    ///
    /// - Parameters:
    ///   - queueNames: The queues to read.
    ///   - limit: How many actions to read of each queue another owner does not hold.
    ///   - owner: The lease holder that reads.
    /// - Returns: The actions read, which queues gave their head alone, and which are paused.
    /// - Throws: ``TaskBrokerError`` when the read fails.
    public func tasks(inQueues queueNames: [String], limit: Int, readingFor owner: String) async throws -> LeaseAwareRead {
        try await tasks(inQueues: queueNames, limit: limit, readingFor: owner, claimBudget: 0, leaseDuration: .seconds(1), now: Date())
    }
}

/// What ``LeaseAwareReads/tasks(inQueues:limit:readingFor:claimBudget:leaseDuration:now:)`` read.
public struct LeaseAwareRead: Sendable {
    /// The actions read, by queue, in enqueue order (queues with nothing stored are absent).
    public var tasks: [String: [StoredTask]]
    /// The queues read that another owner holds, and when that lease ends: only their head was read.
    public var heldElsewhere: [String: Date]
    /// The queues read that an operator paused (also those with nothing stored).
    public var paused: Set<String>
    /// The queues whose lease the read took, with its epoch: each one's head (its first action in
    /// ``tasks``) is claimed, as a granted claim's (``TaskClaimResult/granted(epoch:)``).
    public var claimed: [String: Int64]

    /// A read's result.
    ///
    /// - Parameters:
    ///   - tasks: The actions read, by queue.
    ///   - heldElsewhere: The queues of which only the head was read, and when their lease ends.
    ///   - paused: The queues read that an operator paused.
    ///   - claimed: The queues whose lease the read took, with its epoch.
    public init(tasks: [String: [StoredTask]], heldElsewhere: [String: Date], paused: Set<String>, claimed: [String: Int64] = [:]) {
        self.tasks = tasks
        self.heldElsewhere = heldElsewhere
        self.paused = paused
        self.claimed = claimed
    }
}
