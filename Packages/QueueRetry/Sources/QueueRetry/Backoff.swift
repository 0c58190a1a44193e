import AsyncPrimitives

/// Exponential backoff: how long to wait before attempt `n + 1` after `n` failures.
///
/// The delay doubles from ``initial`` with every failure and stops growing at ``maximum``:
/// 1, 2, 4, 8 … seconds by default. With ``jitter`` set, each delay is drawn uniformly from
/// `delay * (1 - jitter) ... delay` with the random source the caller passes, so retries of
/// many clients spread out while staying under the cap.
///
/// Every input is accepted: durations are clamped to `0 ... Duration.clampingLimit` (about
/// 31.7 years, QueueKit's one policy for durations, see `Duration.clamping(_:)`), and a NaN
/// jitter counts as 0, so no delay computed here can overflow a clock.
///
/// `Backoff` is a pure value: ``BackoffRetryStrategy`` and TaskBroker's timed retries both use it.
public struct Backoff: Sendable, Hashable {
    /// The delay after the first failure.
    public var initial: Duration
    /// The longest delay, however many failures there were.
    public var maximum: Duration
    /// The fraction (0 ... 1) of each delay that may be taken off at random; 0 turns jitter off.
    public var jitter: Double

    /// Creates a backoff that starts at `initial`, doubles, and is capped at `maximum`.
    ///
    /// - Parameters:
    ///   - initial: The delay after the first failure; clamped to `0 ... Duration.clampingLimit`.
    ///   - maximum: The cap; clamped to `initial ... Duration.clampingLimit`.
    ///   - jitter: The random fraction taken off each delay, clamped to `0 ... 1` (NaN counts
    ///     as 0). Defaults to 0.
    public init(initial: Duration = .seconds(1), maximum: Duration = .seconds(3600), jitter: Double = 0) {
        let initial = Duration.clamping(initial)
        self.initial = initial
        self.maximum = max(Duration.clamping(maximum), initial)
        self.jitter = jitter > 0 ? min(jitter, 1) : 0 // NaN compares false: no jitter.
    }

    /// The delay before the next attempt of a job that has failed `failures` times, without jitter.
    ///
    /// - Parameter failures: How many times in a row the job has failed; 1 for the first failure.
    /// - Returns: `initial * 2^(failures - 1)`, capped at ``maximum``; `.zero` for `failures < 1`.
    public func delay(afterFailures failures: Int) -> Duration {
        guard failures >= 1 else { return .zero }
        // The fields are public and mutable, so clamp again: a value set after `init` obeys
        // the same policy.
        let maximum = max(Duration.clamping(maximum), Duration.clamping(initial))
        var delay = Duration.clamping(initial)
        var doublings = failures - 1
        while doublings > 0, delay > .zero, delay < maximum {
            delay *= 2
            doublings -= 1
        }
        return min(delay, maximum)
    }

    /// The delay before the next attempt with jitter drawn from `generator`.
    ///
    /// - Parameters:
    ///   - failures: How many times in a row the job has failed; 1 for the first failure.
    ///   - generator: The random source; inject a seeded one in tests.
    /// - Returns: A delay in `delay(afterFailures:) * (1 - jitter) ... delay(afterFailures:)`.
    public func delay(afterFailures failures: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let full = delay(afterFailures: failures)
        guard jitter > 0, full > .zero else { return full } // NaN compares false: no jitter.
        let fraction = Double.random(in: 0...min(jitter, 1), using: &generator)
        return full - full * fraction
    }
}
