import Synchronization

/// A `Clock` that moves only when a test tells it to.
///
/// Code under test takes `some Clock<Duration>`; a test hands it a `ManualClock`,
/// waits until the code is asleep with ``sleepers(atLeast:)`` and then moves time with
/// ``advance(by:)``. Every sleeper whose deadline has been reached resumes, in deadline
/// order, so a test never sleeps and never races the code it drives.
///
/// ```swift
/// let clock = ManualClock()
/// let task = Task { try await clock.sleep(for: .seconds(2)) }
/// await clock.sleepers(atLeast: 1)
/// clock.advance(by: .seconds(2))   // `task` resumes now
/// ```
public final class ManualClock: Clock, Sendable {
    /// A point on a ``ManualClock``'s time line: the time elapsed since the clock was made.
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable {
        /// The time elapsed since the clock's start.
        public var offset: Duration

        /// Creates an instant `offset` after the clock's start.
        public init(offset: Duration) {
            self.offset = offset
        }

        /// The instant `duration` after this one.
        public func advanced(by duration: Duration) -> Instant {
            Instant(offset: offset + duration)
        }

        /// The time from this instant to `other`.
        public func duration(to other: Instant) -> Duration {
            other.offset - offset
        }

        /// Whether `lhs` comes before `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool {
            lhs.offset < rhs.offset
        }
    }

    private struct Sleeper {
        let id: UInt64
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct Waiter {
        let id: UInt64
        let count: Int
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        var waiters: [Waiter] = []
        /// Sleeper and waiter ids cancelled before their continuation was stored.
        var cancelledEarly: Set<UInt64> = []
    }

    private let state = Mutex(State())

    /// Creates a clock that reads `.zero` until it is advanced.
    public init() {}

    /// The current instant.
    public var now: Instant {
        state.withLock { $0.now }
    }

    /// The smallest step this clock distinguishes.
    public var minimumResolution: Duration {
        .zero
    }

    /// The number of tasks sleeping on this clock right now.
    public var sleeperCount: Int {
        state.withLock { $0.sleepers.count }
    }

    /// Suspends until `deadline` has been reached by ``advance(by:)`` or ``advance(to:)``.
    ///
    /// - Throws: `CancellationError` when the sleeping task is cancelled.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Action { case resume, cancel, wait([CheckedContinuation<Void, Never>]) }
                let action = state.withLock { state -> Action in
                    if state.cancelledEarly.remove(id) != nil { return .cancel }
                    if deadline <= state.now { return .resume }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return .wait(Self.takeSatisfiedWaiters(&state))
                }
                switch action {
                case .resume: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                case .wait(let satisfied): satisfied.forEach { $0.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                if let index = state.sleepers.firstIndex(where: { $0.id == id }) {
                    return state.sleepers.remove(at: index)
                }
                state.cancelledEarly.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward by `duration` and resumes every sleeper whose deadline is reached.
    public func advance(by duration: Duration) {
        let target = state.withLock { $0.now.advanced(by: duration) }
        advance(to: target)
    }

    /// Moves the clock to `instant` (never backwards) and resumes every sleeper whose
    /// deadline is reached, earliest deadline first.
    public func advance(to instant: Instant) {
        let due = state.withLock { state -> [Sleeper] in
            if instant > state.now { state.now = instant }
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due.sorted { ($0.deadline, $0.id) < ($1.deadline, $1.id) }
        }
        for sleeper in due {
            sleeper.continuation.resume()
        }
    }

    /// Returns once at least `count` tasks are sleeping on this clock.
    ///
    /// Await this before ``advance(by:)`` so that the code under test has reached its sleep.
    /// A cancelled wait (a test past its time limit, say) returns at once, so that the test
    /// goes on to fail instead of hanging.
    public func sleepers(atLeast count: Int) async {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if state.sleepers.count >= count || state.cancelledEarly.remove(id) != nil { return true }
                    state.waiters.append(Waiter(id: id, count: count, continuation: continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.cancelledEarly.insert(id)
                    return nil
                }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume()
        }
    }

    private static func takeSatisfiedWaiters(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        let count = state.sleepers.count
        let satisfied = state.waiters.filter { $0.count <= count }.map(\.continuation)
        state.waiters.removeAll { $0.count <= count }
        return satisfied
    }
}
