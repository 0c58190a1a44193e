import AsyncPrimitivesTesting
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ManualClockTests {
    @Test func sleeperWakesOnlyWhenItsDeadlineIsReached() async throws {
        let clock = ManualClock()
        let woke = EventCollector<ManualClock.Instant>()
        let task = Task {
            try await clock.sleep(for: .seconds(2))
            woke.record(clock.now)
        }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        #expect(woke.count == 0)
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(1))
        try await task.valueOrCancel
        #expect(woke.values == [ManualClock.Instant(offset: .seconds(2))])
        #expect(clock.sleeperCount == 0)
    }

    @Test func sleepersWakeInDeadlineOrder() async throws {
        let clock = ManualClock()
        let order = EventCollector<Int>()
        let late = Task {
            try await clock.sleep(for: .seconds(5))
            order.record(5)
        }
        await clock.sleepers(atLeast: 1)
        let early = Task {
            try await clock.sleep(for: .seconds(3))
            order.record(3)
        }
        await clock.sleepers(atLeast: 2)
        clock.advance(by: .seconds(3))
        #expect(await order.values(count: 1) == [3])
        clock.advance(by: .seconds(2))
        #expect(await order.values(count: 2) == [3, 5])
        try await late.valueOrCancel
        try await early.valueOrCancel
    }

    @Test func aPastDeadlineReturnsAtOnce() async throws {
        let clock = ManualClock()
        clock.advance(by: .seconds(10))
        try await clock.sleep(until: ManualClock.Instant(offset: .seconds(4)))
        #expect(clock.now == ManualClock.Instant(offset: .seconds(10)))
    }

    @Test func cancellingASleeperThrowsCancellationError() async {
        let clock = ManualClock()
        let task = Task { try await clock.sleep(for: .seconds(60)) }
        await clock.sleepers(atLeast: 1)
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.valueOrCancel }
        #expect(clock.sleeperCount == 0)
    }

    @Test func collectorReturnsTheFirstValuesOnceEnoughHaveArrived() async {
        let collector = EventCollector<Int>()
        async let firstTwo = collector.values(count: 2)
        for value in 1...3 { collector.record(value) }
        #expect(await firstTwo == [1, 2])
        #expect(collector.values == [1, 2, 3])
    }

    /// A test past its time limit is cancelled: its waits must end so that it fails, not hang
    /// the whole test run. Cancelled before or while waiting, a wait returns what has arrived.
    @Test func aCancelledWaitForValuesReturnsWhatHasArrived() async {
        for round in 0..<100 {
            let collector = EventCollector<Int>()
            collector.record(round)
            let wait = Task { await collector.values(count: 2) }
            if round.isMultiple(of: 2) { await Task.yield() }
            wait.cancel()
            #expect(await wait.valueOrCancel == [round])
            // The collector still works for a wait that is not cancelled.
            collector.record(-1)
            #expect(await collector.values(count: 2) == [round, -1])
        }
    }

    @Test func aCancelledWaitForSleepersReturns() async {
        let clock = ManualClock()
        for round in 0..<100 {
            let wait = Task { await clock.sleepers(atLeast: 1) }
            if round.isMultiple(of: 2) { await Task.yield() }
            wait.cancel()
            await wait.valueOrCancel
        }
        #expect(clock.sleeperCount == 0)
        // A wait that is not cancelled still ends when a sleeper arrives.
        let sleeper = Task { try await clock.sleep(for: .seconds(1)) }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        try? await sleeper.valueOrCancel
        #expect(clock.sleeperCount == 0)
    }
}
