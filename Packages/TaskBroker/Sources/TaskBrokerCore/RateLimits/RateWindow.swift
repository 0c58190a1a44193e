import Foundation

/// One bucket's starts in the window that ends now, and what a request for more may be granted:
/// the rule every storage backend applies inside its transaction.
public struct RateWindow: Sendable {
    /// Starts recorded in the window (those older were deleted first).
    public var used: Int
    /// The oldest of them, seconds since 1970.
    public var oldest: Double?
    /// The time of the request, seconds since 1970 (the server's clock on a shared backend).
    public var now: Double
    /// At most this many starts per window.
    public var limit: Int
    /// The window, in seconds.
    public var period: Double

    /// Describes a bucket's window (for storage backends).
    ///
    /// - Parameters:
    ///   - used: Starts recorded in the window.
    ///   - oldest: The oldest of them.
    ///   - now: The request's time.
    ///   - limit: At most this many per window.
    ///   - period: The window, in seconds.
    public init(used: Int, oldest: Double?, now: Double, limit: Int, period: Double) {
        self.used = used
        self.oldest = oldest
        self.now = now
        self.limit = limit
        self.period = period
    }

    /// How many of `count` starts may be recorded now (all at `now`), and when fewer: how long
    /// until the oldest start leaves the window (the one granted now, if none was there).
    public func grant(_ count: Int) -> TaskRateGrant {
        let at = Date(timeIntervalSince1970: now)
        let granted = min(count, max(0, limit - used))
        guard granted < count else { return TaskRateGrant(granted: granted, retryAfter: nil, at: at) }
        let wait = (oldest ?? now) + period - now
        // To the nearest millisecond: a wait a fraction of one short finds the start not yet free,
        // and asks again a millisecond later.
        return TaskRateGrant(granted: granted, retryAfter: .milliseconds(Int64(max(1, (wait * 1000).rounded()))), at: at)
    }

    /// How close two times count as one: a start that leaves the window at `now - period` is out
    /// of it, whatever the rounding of the seconds since 1970.
    public static let tolerance = 1e-6
}
