import Dispatch

/// Runs an action after a duration on a job's clock, and can be cancelled.
///
/// A `ContinuousClock` (the default) is served by a Dispatch timer, so that a delay never
/// needs a free Swift-concurrency thread: callers blocked in `await()` may hold all of them
/// on a small machine. Any other clock (a test's manual clock) is slept on in a task.
struct JobTimer: Sendable {
    /// Cancels a scheduled action that has not run yet.
    struct Handle: Sendable {
        let cancel: @Sendable () -> Void
    }

    private let scheduleAction: @Sendable (Duration, @escaping @Sendable () -> Void) -> Handle

    init<C: Clock<Duration>>(clock: C) {
        if clock is ContinuousClock {
            scheduleAction = { duration, action in
                // Cancelling drops the action (and what it captures) at once; the timer's
                // block then finds nothing to run.
                let pending = Locked<(@Sendable () -> Void)?>(action)
                DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + Self.dispatchInterval(duration)) {
                    let action = pending.withLock { action -> (@Sendable () -> Void)? in
                        defer { action = nil }
                        return action
                    }
                    action?()
                }
                return Handle { pending.withLock { $0 = nil } }
            }
        } else {
            scheduleAction = { duration, action in
                let task = Task {
                    do { try await clock.sleep(for: duration) } catch { return }
                    action()
                }
                return Handle { task.cancel() }
            }
        }
    }

    /// Runs `action` once `duration` has passed, unless the returned handle cancels it first.
    func schedule(after duration: Duration, _ action: @escaping @Sendable () -> Void) -> Handle {
        scheduleAction(duration, action)
    }

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        let limit = Int64.max / 1_000_000_000 - 1
        guard seconds < limit else { return .never }
        return .nanoseconds(Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
    }
}
