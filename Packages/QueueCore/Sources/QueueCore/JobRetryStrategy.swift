/// Decides what happens to a job that failed on a ``JobQueue``.
///
/// The queue calls ``retry(job:failedOnQueue:)`` on its own executor, once per failure, while
/// the failed job still holds its processing slot. A strategy re-queues the job with
/// ``JobQueue/retry(_:)`` (and may ``JobQueue/stop()`` the queue and ``JobQueue/start()`` it
/// later); a job it does not re-queue before returning is purged: dropped from the queue and
/// deleted from the persister. QueueRetry provides `HaltRetryStrategy`, `MaxRetryStrategy`
/// and `BackoffRetryStrategy`.
public protocol JobRetryStrategy: Sendable {
    /// Handles a job that failed on `queue`.
    ///
    /// - Parameters:
    ///   - job: The job that failed.
    ///   - queue: The queue it failed on; ``JobQueue/failureCount(ofJobWithID:)`` says how
    ///     often it has failed there, this failure included.
    func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>)
}

/// What ``JobQueue/stopForRetry()`` returns and ``JobQueue/restart(_:)`` takes: a retry
/// strategy's stop, which its restart undoes only if nobody started or stopped the queue since.
public struct JobQueueRestartTicket: Sendable, Hashable {
    let generation: UInt64
    /// `false` when the queue was already stopped by someone else: the restart does nothing.
    let restarts: Bool
}
