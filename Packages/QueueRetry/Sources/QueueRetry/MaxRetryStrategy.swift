public import QueueCore

/// Re-queues a failed job at the front until it has failed `maxAttempts` times in all, then
/// purges it (drops it and deletes it from the persister).
///
/// ```swift
/// queue.retryStrategy = MaxRetryStrategy(maxAttempts: 5)   // 5 attempts, then purged
/// ```
///
/// Failures are counted by the queue (`JobQueue.failureCount(ofJobWithID:)`) per
/// job id, from when the job was added; the count lives in memory, so a restart starts it again.
public struct MaxRetryStrategy: JobRetryStrategy {
    /// How many failed attempts a job gets before it is purged; at least 1.
    public let maxAttempts: Int

    /// Creates the strategy.
    ///
    /// - Parameter maxAttempts: The number of attempts, the first included: with 5 (the
    ///   default, as in DESIGN.md), a job is retried at most 4 times. Values below 1 are
    ///   treated as 1 (no retry).
    public init(maxAttempts: Int = 5) {
        self.maxAttempts = max(1, maxAttempts)
    }

    /// Re-queues `job` at the front of `queue` unless it has now failed `maxAttempts` times.
    ///
    /// - Parameters:
    ///   - job: The job that failed.
    ///   - queue: The queue it failed on.
    public func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
        guard queue.failureCount(ofJobWithID: job.id) < maxAttempts else { return }
        queue.retry(job)
    }
}
