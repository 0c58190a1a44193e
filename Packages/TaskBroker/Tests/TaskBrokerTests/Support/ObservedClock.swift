import AsyncPrimitivesTesting
import Synchronization

/// A `ManualClock` whose sleepers a test sees by deadline.
///
/// A broker computes a timer's delay, then starts a task that sleeps for it: a clock advanced in
/// between would push the deadline back by the advance. A test that knows which deadlines should
/// be slept on waits for exactly those (``sleepers(where:)``) before it advances the clock, instead
/// of counting sleepers (a cancelled timer's sleeper may not be gone yet).
final class ObservedClock: Clock, Sendable {
    typealias Instant = ManualClock.Instant

    private let base = ManualClock()
    private let sleeping = Mutex<[Instant: Int]>([:])
    /// One value per change of `sleeping`: what ``sleepers(where:)`` awaits.
    private let changes = EventCollector<Int>()

    var now: Instant { base.now }

    var minimumResolution: Duration { base.minimumResolution }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        sleeping.withLock { $0[deadline, default: 0] += 1 }
        changes.record(1)
        defer {
            sleeping.withLock { sleeping in
                sleeping[deadline, default: 0] -= 1
                if sleeping[deadline] == 0 { sleeping[deadline] = nil }
            }
            changes.record(-1)
        }
        try await base.sleep(until: deadline, tolerance: tolerance)
    }

    /// Moves the clock forward; every sleeper whose deadline is reached resumes.
    func advance(by duration: Duration) {
        base.advance(by: duration)
    }

    /// The deadlines slept on right now, with the number of sleepers of each.
    var sleepers: [Instant: Int] {
        sleeping.withLock { $0 }
    }

    /// Waits until `condition` holds for the sleepers.
    ///
    /// - Returns: `false` if the wait was cancelled (a test past its time limit) before it held.
    func sleepers(where condition: ([Instant: Int]) -> Bool) async -> Bool {
        while true {
            let seen = changes.count
            if condition(sleepers) { return true }
            if await changes.values(count: seen + 1).count <= seen { return condition(sleepers) }
        }
    }
}
