public import Foundation

/// A broker that holds leases on a database shared by several processes (PostgreSQL), as
/// ``TaskDatabase/workers()`` reports it: what it runs now, and until when it may without renewing.
public struct TaskWorker: Sendable, Hashable {
    /// The name that holds the broker's leases: `NAME#N@PROCESS`, the broker's name, its number in
    /// its process, and its process's random token (``brokerName``, ``process``).
    public var owner: String
    /// The queues whose leases it holds, by name: their heads run (or are about to) on it.
    public var queues: [TaskWorkerLease]
    /// How many plain parallel actions it holds (`TaskDatabase.saveParallel(_:notBefore:priority:)`).
    public var parallelActions: Int
    /// When its claims on plain parallel actions end unless it renews them (`nil`: it holds none).
    public var parallelExpiresAt: Date?

    /// The name the broker was set up with (the part of ``owner`` before its last `#`).
    public var brokerName: String {
        owner.lastIndex(of: "#").map { String(owner[..<$0]) } ?? owner
    }

    /// The token of the broker's process, shared by every broker of that process (the part of
    /// ``owner`` after its last `@`).
    public var process: String {
        owner.lastIndex(of: "@").map { String(owner[owner.index(after: $0)...]) } ?? owner
    }

    /// Creates a worker's description (for storage backends).
    ///
    /// - Parameters:
    ///   - owner: The name that holds its leases.
    ///   - queues: The queue leases it holds.
    ///   - parallelActions: How many plain parallel actions it holds.
    ///   - parallelExpiresAt: When its claims on them end unless renewed.
    public init(owner: String, queues: [TaskWorkerLease] = [], parallelActions: Int = 0, parallelExpiresAt: Date? = nil) {
        self.owner = owner
        self.queues = queues
        self.parallelActions = parallelActions
        self.parallelExpiresAt = parallelExpiresAt
    }
}

/// A queue's lease held by a ``TaskWorker``.
public struct TaskWorkerLease: Sendable, Hashable {
    /// The queue.
    public var queueName: String
    /// The lease's epoch: it grows each time another worker takes the queue over, and fences the
    /// outcomes of the worker that held it before.
    public var epoch: Int64
    /// When the lease ends unless its holder renews it.
    public var expiresAt: Date

    /// Creates a lease's description (for storage backends).
    ///
    /// - Parameters:
    ///   - queueName: The queue.
    ///   - epoch: The lease's epoch.
    ///   - expiresAt: When it ends unless renewed.
    public init(queueName: String, epoch: Int64, expiresAt: Date) {
        self.queueName = queueName
        self.epoch = epoch
        self.expiresAt = expiresAt
    }
}

/// The starts a rate limit's bucket counts now (``TaskDatabase/rateLimitUsage()``): those recorded
/// by every broker that shares the bucket, still inside their windows.
public struct TaskRateUsage: Sendable, Hashable {
    /// The bucket: `prefix:P` for a limit shared by the queues of prefix `P`
    /// (`TaskRateLimit.Scope.shared`), `queue:Q` for queue `Q` of a limit per queue
    /// (`TaskRateLimit.Scope.eachQueue`).
    public var bucket: String
    /// How many starts count against the limit now.
    public var starts: Int
    /// When the latest of them was recorded.
    public var latestStart: Date
    /// When the last of them leaves its window (and the bucket is empty again, unless more start).
    public var emptyAt: Date

    /// Creates a bucket's usage (for storage backends).
    ///
    /// - Parameters:
    ///   - bucket: The bucket.
    ///   - starts: How many starts count now.
    ///   - latestStart: When the latest was recorded.
    ///   - emptyAt: When the last leaves its window.
    public init(bucket: String, starts: Int, latestStart: Date, emptyAt: Date) {
        self.bucket = bucket
        self.starts = starts
        self.latestStart = latestStart
        self.emptyAt = emptyAt
    }
}
