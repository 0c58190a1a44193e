/// Exponential backoff: how long to wait before attempt `n + 1` after `n` failures.
///
/// The delay doubles from ``initial`` with every failure and stops growing at ``maximum``:
/// 1, 2, 4, 8 … seconds by default. With ``jitter`` set, each delay is drawn uniformly from
/// `delay * (1 - jitter) ... delay` with the random source the caller passes, so retries of
/// many clients spread out while staying under the cap.
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
    ///   - initial: The delay after the first failure; clamped to at least zero.
    ///   - maximum: The cap; clamped to at least `initial`.
    ///   - jitter: The random fraction taken off each delay, clamped to `0 ... 1`. Defaults to 0.
    public init(initial: Duration = .seconds(1), maximum: Duration = .seconds(3600), jitter: Double = 0) {
        let initial = max(initial, .zero)
        self.initial = initial
        self.maximum = max(maximum, initial)
        self.jitter = min(max(jitter, 0), 1)
    }

    /// The delay before the next attempt of a job that has failed `failures` times, without jitter.
    ///
    /// - Parameter failures: How many times in a row the job has failed; 1 for the first failure.
    /// - Returns: `initial * 2^(failures - 1)`, capped at ``maximum``; `.zero` for `failures < 1`.
    public func delay(afterFailures failures: Int) -> Duration {
        guard failures >= 1 else { return .zero }
        var delay = initial
        var doublings = failures - 1
        while doublings > 0, delay < maximum {
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
        guard jitter > 0, full > .zero else { return full }
        let fraction = Double.random(in: 0...jitter, using: &generator)
        return full - full * fraction
    }
}
