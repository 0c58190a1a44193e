import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Testing

@Suite(.timeLimit(.minutes(1)))
struct DebouncerTests {
    @Test func onlyTheLastCallOfABurstRunsAfterTheQuietInterval() async {
        let clock = ManualClock()
        let queue = namedQueue("debounce")
        let debouncer = Debouncer(milliseconds: 100, queue: queue, clock: clock)
        let runs = EventCollector<Int>()
        for call in 1...5 {
            debouncer.debounce { runs.record(call) }
        }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(99))
        #expect(runs.count == 0)
        clock.advance(by: .milliseconds(1))
        #expect(await runs.values(count: 1) == [5])
        await barrier(queue)
        #expect(runs.values == [5])
    }

    @Test func theBlockRunsOnTheDebouncersQueue() async {
        let clock = ManualClock()
        let queue = namedQueue("debounce-target")
        let debouncer = Debouncer(delay: 0.25, queue: queue, clock: clock)
        let names = EventCollector<String?>()
        debouncer.debounce { names.record(currentQueueName()) }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(250))
        #expect(await names.values(count: 1) == ["debounce-target"])
    }

    @Test func aCallDuringTheIntervalRestartsIt() async {
        let clock = ManualClock()
        let queue = DispatchQueue(label: "debounce-restart")
        let debouncer = Debouncer(milliseconds: 100, queue: queue, clock: clock)
        let runs = EventCollector<String>()
        debouncer.debounce { runs.record("first") }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(60))
        debouncer.debounce { runs.record("second") }
        await clock.sleepers(atLeast: 1)
        // 100 ms after the first call: the first call's deadline has passed, but it was replaced.
        clock.advance(by: .milliseconds(60))
        await barrier(queue)
        #expect(runs.count == 0)
        clock.advance(by: .milliseconds(40))
        #expect(await runs.values(count: 1) == ["second"])
    }

    @Test func separateBurstsEachRunTheirLastCall() async {
        let clock = ManualClock()
        let queue = DispatchQueue(label: "debounce-bursts")
        let debouncer = Debouncer(milliseconds: 50, queue: queue, clock: clock)
        let runs = EventCollector<String>()
        debouncer.debounce { runs.record("a1") }
        debouncer.debounce { runs.record("a2") }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(50))
        #expect(await runs.values(count: 1) == ["a2"])
        debouncer.debounce { runs.record("b1") }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(50))
        #expect(await runs.values(count: 2) == ["a2", "b1"])
    }

    @Test func cancelBeforeAnyCallIsHarmless() async {
        let clock = ManualClock()
        let debouncer = Debouncer(milliseconds: 10, queue: .global(), clock: clock)
        debouncer.cancel()
        let runs = EventCollector<Int>()
        debouncer.debounce { runs.record(1) }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(10))
        #expect(await runs.values(count: 1) == [1])
    }

    @Test func cancelDuringTheIntervalDropsThePendingCall() async {
        let clock = ManualClock()
        let queue = DispatchQueue(label: "debounce-cancel")
        let debouncer = Debouncer(milliseconds: 10, queue: queue, clock: clock)
        let runs = EventCollector<Int>()
        debouncer.debounce { runs.record(1) }
        await clock.sleepers(atLeast: 1)
        debouncer.cancel()
        #expect(clock.sleeperCount == 0)
        clock.advance(by: .seconds(1))
        await barrier(queue)
        #expect(runs.count == 0)
        // The debouncer still works after a cancel.
        debouncer.debounce { runs.record(2) }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(10))
        #expect(await runs.values(count: 1) == [2])
    }

    @Test func cancelAfterTheBlockRanChangesNothing() async {
        let clock = ManualClock()
        let debouncer = Debouncer(milliseconds: 10, queue: .global(), clock: clock)
        let runs = EventCollector<Int>()
        debouncer.debounce { runs.record(1) }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(10))
        #expect(await runs.values(count: 1) == [1])
        debouncer.cancel()
        #expect(runs.values == [1])
    }

    @Test func cancelRightAfterTheIntervalEndsStillDropsTheCall() async {
        let clock = ManualClock()
        let queue = DispatchQueue(label: "debounce-late-cancel")
        let debouncer = Debouncer(milliseconds: 10, queue: queue, clock: clock)
        let runs = EventCollector<Int>()
        let gate = DispatchSemaphore(value: 0)
        let blocked = EventCollector<Bool>()
        queue.async {
            blocked.record(true)
            gate.wait()
        }
        _ = await blocked.values(count: 1)
        debouncer.debounce { runs.record(1) }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(10))
        // The block cannot start while the queue is held; cancel it before it does.
        debouncer.cancel()
        gate.signal()
        await barrier(queue)
        await barrier(queue)
        #expect(runs.count == 0)
    }

    @Test func concurrentCallsRunExactlyOneBlock() async {
        let clock = ManualClock()
        let queue = DispatchQueue(label: "debounce-concurrent")
        let debouncer = Debouncer(milliseconds: 20, queue: queue, clock: clock)
        let runs = EventCollector<Int>()
        DispatchQueue.concurrentPerform(iterations: 200) { call in
            debouncer.debounce { runs.record(call) }
        }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(20))
        _ = await runs.values(count: 1)
        await barrier(queue)
        #expect(runs.count == 1)
    }
}

/// Returns once every block queued on the serial `queue` before this call has run.
private func barrier(_ queue: DispatchQueue) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        queue.async { continuation.resume() }
    }
}
