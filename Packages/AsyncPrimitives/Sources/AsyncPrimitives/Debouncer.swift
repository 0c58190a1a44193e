public import Dispatch
public import Foundation
import Synchronization

/// Runs only the last of a burst of calls, once the calls have been quiet for an interval.
///
/// ```swift
/// let debouncer = Debouncer(milliseconds: 300, queue: .main)
/// // On every keystroke:
/// debouncer.debounce { search(field.text) }
/// ```
///
/// Each ``debounce(_:)`` call replaces the pending block and restarts the interval; the block
/// runs on `queue` once no further call has arrived for the whole interval. ``cancel()`` drops
/// the pending block. All methods are thread safe. Releasing the debouncer drops its pending
/// block too.
public final class Debouncer: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var timer: Task<Void, Never>?
    }

    private let delay: Duration
    private let queue: DispatchQueue
    private let sleep: @Sendable (Duration) async throws -> Void
    private let state = Mutex(State())

    /// Creates a debouncer with a quiet interval in milliseconds.
    ///
    /// - Parameters:
    ///   - milliseconds: How long calls must be quiet before the last one runs. Any value is
    ///     accepted: a negative one counts as zero, one above `Duration.clampingLimit` as the limit.
    ///   - queue: Where the block runs. Defaults to ``CallbackQueue/default``.
    ///   - clock: The clock that measures the interval. Tests pass a manual clock.
    public convenience init(
        milliseconds: Int,
        queue: DispatchQueue = CallbackQueue.default,
        clock: some Clock<Duration> = ContinuousClock()
    ) {
        self.init(interval: .milliseconds(milliseconds), queue: queue, clock: clock)
    }

    /// Creates a debouncer with a quiet interval in seconds.
    ///
    /// - Parameters:
    ///   - delay: How long calls must be quiet before the last one runs, in seconds. Any value
    ///     is accepted and clamped with `Duration.clamping(seconds:)`: NaN or negative counts
    ///     as zero, infinity or more than `Duration.clampingLimit` as the limit.
    ///   - queue: Where the block runs. Defaults to ``CallbackQueue/default``.
    ///   - clock: The clock that measures the interval. Tests pass a manual clock.
    public convenience init(
        delay: TimeInterval,
        queue: DispatchQueue = CallbackQueue.default,
        clock: some Clock<Duration> = ContinuousClock()
    ) {
        self.init(interval: .clamping(seconds: delay), queue: queue, clock: clock)
    }

    /// Creates a debouncer with a quiet interval.
    ///
    /// - Parameters:
    ///   - interval: How long calls must be quiet before the last one runs. A negative
    ///     interval counts as zero, one above `Duration.clampingLimit` as the limit.
    ///   - queue: Where the block runs. Defaults to ``CallbackQueue/default``.
    ///   - clock: The clock that measures the interval. Tests pass a manual clock.
    public init(
        interval: Duration,
        queue: DispatchQueue = CallbackQueue.default,
        clock: some Clock<Duration> = ContinuousClock()
    ) {
        self.delay = .clamping(interval)
        self.queue = queue
        self.sleep = { try await clock.sleep(for: $0) }
    }

    deinit {
        state.withLock { $0.timer }?.cancel()
    }

    /// Schedules `block` to run on the debouncer's queue after the quiet interval, replacing
    /// the block of any earlier call that has not run yet.
    ///
    /// - Parameter block: The work to run once calls have been quiet for the interval.
    public func debounce(_ block: @escaping @Sendable () -> Void) {
        let (generation, previous) = state.withLock { state in
            state.generation &+= 1
            defer { state.timer = nil }
            return (state.generation, state.timer)
        }
        previous?.cancel()
        let timer = Task { [weak self, delay, sleep] in
            do {
                try await sleep(delay)
            } catch {
                return
            }
            self?.fire(generation, block)
        }
        let superseded = state.withLock { state in
            guard state.generation == generation else { return true }
            state.timer = timer
            return false
        }
        if superseded { timer.cancel() }
    }

    /// Drops the pending block, if any. A block that has already started is not affected.
    public func cancel() {
        let timer = state.withLock { state in
            state.generation &+= 1
            defer { state.timer = nil }
            return state.timer
        }
        timer?.cancel()
    }

    /// Runs `block` on the queue unless a later call or ``cancel()`` superseded it meanwhile.
    private func fire(_ generation: UInt64, _ block: @escaping @Sendable () -> Void) {
        queue.async { [weak self] in
            let current = self?.state.withLock { state -> Bool in
                guard state.generation == generation else { return false }
                state.timer = nil
                return true
            }
            if current == true { block() }
        }
    }
}
