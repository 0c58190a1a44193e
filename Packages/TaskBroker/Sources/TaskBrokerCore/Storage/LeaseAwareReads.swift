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
    /// - Parameters:
    ///   - queueNames: The queues to read.
    ///   - limit: How many actions to read of each queue another owner does not hold.
    ///   - owner: The lease holder that reads (its own leases do not cut a read short).
    /// - Returns: The actions read, which queues gave their head alone, and which are paused.
    /// - Throws: ``TaskBrokerError`` when the read fails; nothing was read then.
    func tasks(inQueues queueNames: [String], limit: Int, readingFor owner: String) async throws -> LeaseAwareRead
}

/// What ``LeaseAwareReads/tasks(inQueues:limit:readingFor:)`` read.
public struct LeaseAwareRead: Sendable {
    /// The actions read, by queue, in enqueue order (queues with nothing stored are absent).
    public var tasks: [String: [StoredTask]]
    /// The queues read that another owner holds, and when that lease ends: only their head was read.
    public var heldElsewhere: [String: Date]
    /// The queues read that an operator paused (also those with nothing stored).
    public var paused: Set<String>

    /// A read's result.
    ///
    /// - Parameters:
    ///   - tasks: The actions read, by queue.
    ///   - heldElsewhere: The queues of which only the head was read, and when their lease ends.
    ///   - paused: The queues read that an operator paused.
    public init(tasks: [String: [StoredTask]], heldElsewhere: [String: Date], paused: Set<String>) {
        self.tasks = tasks
        self.heldElsewhere = heldElsewhere
        self.paused = paused
    }
}
