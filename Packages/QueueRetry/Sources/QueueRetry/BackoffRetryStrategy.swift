public import Foundation
public import QueueCore
import Synchronization

/// Stops the queue, re-queues the failed job at the front and restarts the queue after a
/// delay that doubles with each consecutive failure of the same job: 1, 2, 4 … seconds,
/// capped at `maxBackoff`. It never purges a job. A different job failing starts again at
/// `initialBackoff`.
///
/// ```swift
/// queue.retryStrategy = BackoffRetryStrategy(maxBackoff: 60 * 60)   // waits at most an hour
/// ```
///
/// Time comes from the injected clock, so tests drive it with a manual clock; optional
/// jitter takes a random fraction off each delay, drawn from the injected random source.
/// One strategy instance keeps one backoff: give each queue its own.
public final class BackoffRetryStrategy: JobRetryStrategy {
    private struct State {
        var lastJobID: String?
        var failures = 0
        var restart: Task<Void, Never>?
        var random: any RandomNumberGenerator & Sendable
    }

    /// The backoff arithmetic: initial delay, cap and jitter.
    public let backoff: Backoff
    private let sleep: @Sendable (Duration) async throws -> Void
    private let state: Mutex<State>

    /// Creates the strategy.
    ///
    /// - Parameters:
    ///   - initialBackoff: Seconds to wait after a job's first failure. Defaults to 1.
    ///   - maxBackoff: The longest wait in seconds. Defaults to 3600 (an hour).
    ///   - jitter: The fraction (0 ... 1) that may be taken off each wait at random. Defaults
    ///     to 0 (off).
    ///   - clock: The clock that times the waits. Defaults to `ContinuousClock()`.
    ///   - randomSource: Where jitter comes from. Defaults to `SystemRandomNumberGenerator()`.
    public init(
        initialBackoff: TimeInterval = 1,
        maxBackoff: TimeInterval = 3600,
        jitter: Double = 0,
        clock: some Clock<Duration> = ContinuousClock(),
        randomSource: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()
    ) {
        self.backoff = Backoff(
            initial: .seconds(initialBackoff.isFinite ? initialBackoff : 1),
            maximum: .seconds(maxBackoff.isFinite ? maxBackoff : 3600),
            jitter: jitter.isFinite ? jitter : 0
        )
        self.sleep = { duration in try await clock.sleep(for: duration) }
        self.state = Mutex(State(random: randomSource))
    }

    deinit {
        state.withLock { $0.restart }?.cancel()
    }

    /// The delay the next failure of the job that failed last would get.
    public var nextBackoff: Duration {
        state.withLock { backoff.delay(afterFailures: $0.failures + 1) }
    }

    /// Stops `queue`, re-queues `job` at its front and schedules `queue.start()` after the backoff.
    ///
    /// - Parameters:
    ///   - job: The job that failed.
    ///   - queue: The queue it failed on.
    public func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
        queue.stop()
        queue.retry(job)
        let backoff = backoff
        let (delay, previous) = state.withLock { state -> (Duration, Task<Void, Never>?) in
            if state.lastJobID != job.id {
                state.lastJobID = job.id
                state.failures = 0
            }
            state.failures += 1
            let delay = backoff.delay(afterFailures: state.failures, using: &state.random)
            let previous = state.restart
            state.restart = nil
            return (delay, previous)
        }
        previous?.cancel()
        let sleep = sleep
        let task = Task { [weak queue] in
            do {
                try await sleep(delay)
            } catch {
                return
            }
            queue?.start()
        }
        state.withLock { $0.restart = task }
    }
}
