import AsyncPrimitives
package import Foundation

/// The broker's time: an injected `Clock` for waiting, anchored to an injected wall-clock
/// reading so that stored retry deadlines (wall-clock dates) turn into durations on the clock.
struct BrokerTime: Sendable {
    let elapsed: @Sendable () -> Duration
    let sleep: @Sendable (Duration) async throws -> Void
    /// Sleeps until the clock has run this long since the broker started: a deadline fixed when it
    /// is computed, however late the sleeping task starts. (A duration counted from the sleep's
    /// start moved a timer's deadline by whatever the clock advanced in between: a test that
    /// advanced its clock right then waited for ever.)
    let sleepUntilElapsed: @Sendable (Duration) async throws -> Void
    let anchor: Date

    init<C: Clock<Duration>>(clock: C, wallClock: @Sendable () -> Date) {
        let start = clock.now
        self.anchor = wallClock()
        self.elapsed = { start.duration(to: clock.now) }
        self.sleep = { duration in try await clock.sleep(for: duration) }
        self.sleepUntilElapsed = { deadline in try await clock.sleep(until: start.advanced(by: deadline), tolerance: nil) }
    }

    /// The current wall-clock time: the anchor plus the time elapsed on the clock.
    func now() -> Date {
        anchor.addingTimeInterval(elapsed().timeInterval)
    }
}

extension Duration {
    package var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Any number of seconds, clamped as every QueueKit package clamps: NaN or negative is zero,
    /// infinity or more than ``Duration/clampingLimit`` is the limit. Never traps.
    package init(timeInterval: TimeInterval) {
        self = .clamping(seconds: timeInterval)
    }
}

extension Duration {
    /// The wait until a stored deadline, to the nearest millisecond (never negative).
    ///
    /// A deadline is stored as a `Double` of seconds since 1970 and read back, and "now" is an
    /// anchor date plus the clock's elapsed time: each step can move it by a fraction of a
    /// microsecond. Unrounded, a retry due in 5 s could wait 5.0000001 s, which a real clock does
    /// not notice and an injected clock advanced by exactly 5 s never reaches.
    static func timer(until deadline: Date, now: Date) -> Duration {
        // Clamped first (NaN or negative is zero, infinity the limit), then counted in whole
        // milliseconds: an integer count, because 0.1 s as a Double is not exactly 100 ms.
        let wait = Duration(timeInterval: deadline.timeIntervalSince(now))
        let milliseconds = Double(wait.components.seconds) * 1_000 + Double(wait.components.attoseconds) / 1e15
        return .milliseconds(Int64(milliseconds.rounded()))
    }

    var nanoseconds: Int64 {
        components.seconds &* 1_000_000_000 &+ components.attoseconds / 1_000_000_000
    }
}
