public import QueueCore

/// Stops the queue and puts the failed job back at the front; someone must call `start()`.
///
/// Despite the name it does not retry by itself: nothing runs until the queue is restarted,
/// and then the failed job runs first.
///
/// ```swift
/// queue.retryStrategy = HaltRetryStrategy()
/// ```
public struct HaltRetryStrategy: JobRetryStrategy {
    /// Creates the strategy.
    public init() {}

    /// Stops `queue` and re-queues `job` at its front.
    ///
    /// - Parameters:
    ///   - job: The job that failed.
    ///   - queue: The queue it failed on.
    public func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
        queue.stop()
        queue.retry(job)
    }
}
