import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Foundation
import Testing

/// Every entry point that takes seconds as a `TimeInterval` accepts any value: the one
/// policy (``Duration/clamping(seconds:)``) turns NaN and negatives into no wait, and
/// infinity or huge values into ``Duration/clampingLimit`` (for a timeout: never). `Duration.seconds(_:)` traps on
/// these, so on the old code each of these tests crashed the test process.
@Suite(.timeLimit(.minutes(1)))
struct DurationClampingTests {
    static let hostile: [Double] = [.infinity, .nan, -1, 1e30]

    @Test(arguments: [
        (Double.infinity, Duration.clampingLimit), (.nan, .zero), (-1, .zero), (1e30, .clampingLimit),
        (-.infinity, .zero), (0, .zero), (2.5, .milliseconds(2500)), (1e9, .clampingLimit),
        (-.nan, .zero), (.ulpOfOne, .seconds(Double.ulpOfOne)),
    ])
    func clampingFollowsOnePolicy(seconds: Double, expected: Duration) {
        #expect(Duration.clamping(seconds: seconds) == expected)
    }

    @Test func clampingADurationKeepsItBetweenZeroAndTheLimit() {
        #expect(Duration.clamping(.milliseconds(Int.max)) == .clampingLimit)
        #expect(Duration.clamping(.seconds(-5)) == .zero)
        #expect(Duration.clamping(.seconds(3)) == .seconds(3))
        #expect(Duration.clampingLimit == .seconds(1_000_000_000))
    }

    @Test(arguments: hostile)
    func timeoutAfterAcceptsAnyInterval(_ interval: Double) async throws {
        let clock = ManualClock()
        let source = DeferredResult<Int>()
        let limited = source.timeoutAfter(interval: interval, clock: clock)
        if Duration.clamping(seconds: interval) == .zero {
            // NaN and negative intervals time out at once.
            let error = await #expect(throws: AsyncPrimitivesError.self) { try await limited.value }
            #expect(error?.code == .timedOut)
        } else {
            // Infinite and huge intervals never time out, and start no timer: one would keep the
            // returned future (and what its handlers hold) for 31 years if the source were dropped.
            clock.advance(to: .init(offset: .clampingLimit))
            #expect(clock.sleeperCount == 0)
            #expect(!limited.isFilled)
            source.success(value: 7)
            #expect(try await limited.value == 7)
        }
    }

    @Test func aTimeoutLongerThanNeverStartsNoTimerAndKeepsNothingAlive() async {
        let clock = ManualClock()
        weak var weakNext: FutureResult<Int>?
        do {
            let source = DeferredResult<Int>()
            let next = source.timeoutAfter(interval: .infinity, clock: clock)
            weakNext = next
        }
        // The source was dropped unfilled: nothing holds the future `timeoutAfter` returned.
        #expect(weakNext == nil)
        #expect(clock.sleeperCount == 0)
        // A finite interval still fails a source that is never filled.
        let source = DeferredResult<Int>()
        let limited = source.timeoutAfter(interval: 5, clock: clock)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(5))
        let error = await #expect(throws: AsyncPrimitivesError.self) { try await limited.value }
        #expect(error?.code == .timedOut)
    }

    @Test(arguments: hostile)
    func debouncerWithAnyDelayInSecondsRunsOnlyWhenItsClampedIntervalHasPassed(_ delay: Double) async {
        let clock = ManualClock()
        let queue = DispatchQueue(label: "clamped-debouncer")
        let debouncer = Debouncer(delay: delay, queue: queue, clock: clock)
        let runs = EventCollector<String>()
        debouncer.debounce { runs.record("ran") }
        if Duration.clamping(seconds: delay) != .zero {
            await clock.sleepers(atLeast: 1)
            clock.advance(by: .seconds(1_000_000))
            await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
            #expect(runs.count == 0)
        }
        clock.advance(to: .init(offset: .clampingLimit))
        #expect(await runs.values(count: 1) == ["ran"])
    }

    @Test(arguments: [Int.max, Int.min, -1])
    func debouncerWithAnyMillisecondsIsClamped(_ milliseconds: Int) async {
        let clock = ManualClock()
        let queue = DispatchQueue(label: "clamped-debouncer-ms")
        let debouncer = Debouncer(milliseconds: milliseconds, queue: queue, clock: clock)
        let runs = EventCollector<String>()
        debouncer.debounce { runs.record("ran") }
        if milliseconds > 0 { await clock.sleepers(atLeast: 1) }
        clock.advance(to: .init(offset: .clampingLimit))
        #expect(await runs.values(count: 1) == ["ran"])
    }
}
