import AsyncPrimitives
public import Foundation
public import QueueCore
import Synchronization

/// Stops the queue, re-queues the failed job at the front and restarts the queue (unless you
/// stopped or started it meanwhile) after a delay that doubles with each consecutive failure
/// of the same job: 1, 2, 4 … seconds, capped at `maxBackoff`. It never purges a job. A
/// different job failing starts again at `initialBackoff`.
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
        /// `nil` while a `retry` call draws from it outside the lock.
        var random: (any RandomNumberGenerator & Sendable)?
    }

    /// The backoff arithmetic: initial delay, cap and jitter.
    public let backoff: Backoff
    private let sleep: @Sendable (Duration) async throws -> Void
    private let state: Mutex<State>

    /// Creates the strategy.
    ///
    /// Any number of seconds is accepted: both are clamped with `Duration.clamping(seconds:)`,
    /// QueueKit's one policy (NaN or negative is no wait, infinity or more than
    /// `Duration.clampingLimit`, about 31.7 years, is that limit).
    ///
    /// - Parameters:
    ///   - initialBackoff: Seconds to wait after a job's first failure. Defaults to 1.
    ///   - maxBackoff: The longest wait in seconds. Defaults to 3600 (an hour).
    ///   - jitter: The fraction (0 ... 1) that may be taken off each wait at random. Defaults
    ///     to 0 (off); NaN counts as 0.
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
            initial: .clamping(seconds: initialBackoff),
            maximum: .clamping(seconds: maxBackoff),
            jitter: jitter
        )
        self.sleep = { duration in try await clock.sleep(for: duration) }
        self.state = Mutex(State(random: randomSource))
    }

    deinit {
        state.withLock { $0.restart }?.cancel()
    }

    /// The delay the next failure of the job that failed last would get.
    public var nextBackoff: Duration {
        let failures = state.withLock { $0.failures }
        return backoff.delay(afterFailures: failures + 1)
    }

    /// Stops `queue`, re-queues `job` at its front and starts the queue again after the backoff,
    /// unless its owner stopped or started it in the meantime (`JobQueue.restart(_:)`, QueueCore).
    ///
    /// - Parameters:
    ///   - job: The job that failed.
    ///   - queue: The queue it failed on.
    public func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
        let ticket = queue.stopForRetry()
        queue.retry(job)
        let (failures, previous, generator) = state.withLock { state in
            if state.lastJobID != job.id {
                state.lastJobID = job.id
                state.failures = 0
            }
            state.failures += 1
            let previous = state.restart
            state.restart = nil
            // The random source is the caller's code: draw from it outside the lock.
            let generator = state.random
            state.random = nil
            return (state.failures, previous, generator)
        }
        previous?.cancel()
        let delay: Duration
        if var random = generator {
            delay = backoff.delay(afterFailures: failures, using: &random)
            state.withLock { $0.random = random }
        } else {
            // Another `retry` is drawing right now (one strategy shared by two queues).
            var system = SystemRandomNumberGenerator()
            delay = backoff.delay(afterFailures: failures, using: &system)
        }
        let sleep = sleep
        let task = Task { [weak queue] in
            do {
                try await sleep(delay)
            } catch {
                return
            }
            // Not if the queue's owner stopped (or started) it during the wait: theirs is the later word.
            queue?.restart(ticket)
        }
        state.withLock { $0.restart = task }
    }
}
