import AsyncPrimitives
import Foundation

/// The broker's time: an injected `Clock` for waiting, anchored to an injected wall-clock
/// reading so that stored retry deadlines (wall-clock dates) turn into durations on the clock.
struct BrokerTime: Sendable {
    let elapsed: @Sendable () -> Duration
    let sleep: @Sendable (Duration) async throws -> Void
    let anchor: Date

    init<C: Clock<Duration>>(clock: C, wallClock: @Sendable () -> Date) {
        let start = clock.now
        self.anchor = wallClock()
        self.elapsed = { start.duration(to: clock.now) }
        self.sleep = { duration in try await clock.sleep(for: duration) }
    }

    /// The current wall-clock time: the anchor plus the time elapsed on the clock.
    func now() -> Date {
        anchor.addingTimeInterval(elapsed().timeInterval)
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Any number of seconds, clamped as every QueueKit package clamps: NaN or negative is zero,
    /// infinity or more than ``Duration/clampingLimit`` is the limit. Never traps.
    init(timeInterval: TimeInterval) {
        self = .clamping(seconds: timeInterval)
    }
}

extension Duration {
    var nanoseconds: Int64 {
        components.seconds &* 1_000_000_000 &+ components.attoseconds / 1_000_000_000
    }
}
