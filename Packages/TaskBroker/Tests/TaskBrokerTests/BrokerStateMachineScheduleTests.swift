import AsyncPrimitivesTesting
import Foundation
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker
import Testing

/// Actions saved to run later and priorities, in the state machine without I/O: a head whose time
/// has not come parks its queue, one timer wakes the broker at the earliest time it knows of, the
/// schedule names the queues whose time came, and ready queues take slots by priority.
@Suite struct BrokerStateMachineScheduleTests {
    let start = Date(timeIntervalSince1970: 1_000)

    @Test func aHeadSavedToRunLaterWaitsWithOneTimerForTheEarliestTimeAndOtherQueuesGoOn() {
        var harness = MachineHarness(wallClockAnchor: start)
        _ = harness.send(.start(["q1", "q2", "q3", "q4"]))
        let later = harness.entry("a", "q1", notBefore: start.addingTimeInterval(10))
        let behind = harness.entry("a2", "q1")
        let sooner = harness.entry("b", "q2", notBefore: start.addingTimeInterval(5))
        let now = harness.entry("c", "q3")
        let past = harness.entry("d", "q4", notBefore: start.addingTimeInterval(-60))
        let out = harness.send(.loaded(["q1": [later, behind], "q2": [sooner], "q3": [now], "q4": [past]], requested: ["q1", "q2", "q3", "q4"]))
        #expect(out.runs.sorted() == ["c", "d"], "a head whose time came runs, the others wait, and so does what is behind them")
        #expect(out.timerDates == [start.addingTimeInterval(5)], "one timer, for the earliest time: \(out.timers)")
        #expect(out.scheduleReads.isEmpty)
    }

    @Test func theTimerReadsTheScheduleAndTheQueuesWhoseTimeCameRun() throws {
        var harness = MachineHarness(wallClockAnchor: start)
        _ = harness.send(.start(["q1", "q2"]))
        let first = harness.entry("a", "q1", notBefore: start.addingTimeInterval(5))
        let second = harness.entry("b", "q2", notBefore: start.addingTimeInterval(10))
        let out = harness.send(.loaded(["q1": [first], "q2": [second]], requested: ["q1", "q2"]))
        let timer = try #require(out.timers.first)

        harness.machine.now = .seconds(5)
        let woke = harness.send(.timerFired(timer.token))
        let read = try #require(woke.scheduleReads.first)
        #expect(read.after.notBefore == start, "the schedule is read from the broker's start (earlier ones were listed)")
        #expect(read.through >= start.addingTimeInterval(5))
        #expect(woke.runs.isEmpty, "nothing runs before the schedule answers")

        let ran = harness.send(.scheduled(["q1"], last: nil, through: read.through, next: start.addingTimeInterval(10), complete: true))
        #expect(ran.runs == ["a"])
        #expect(ran.timerDates == [start.addingTimeInterval(10)], "the next wake-up is the schedule's next time")

        let successor = harness.entry("a2", "q1")
        _ = harness.send(.changes([.saved(successor)]))
        let done = harness.send(.stored([.success(first)]))
        #expect(done.runs == ["a2"], "once its head ran, the queue goes on")
        harness.machine.now = .seconds(10)
        let nextTimer = try #require(ran.timers.first)
        let second2 = harness.send(.timerFired(nextTimer.token))
        let read2 = try #require(second2.scheduleReads.first)
        #expect(read2.after.notBefore == read.through, "the next read starts where the last one ended")
        #expect(harness.send(.scheduled(["q2"], last: nil, through: read2.through, next: nil, complete: true)).runs == ["b"])
    }

    @Test func aScheduleReadThatFilledItsPageReadsOnFromItsLastEntry() throws {
        var harness = MachineHarness(wallClockAnchor: start)
        _ = harness.send(.start(["q1"]))
        let entry = harness.entry("a", "q1", notBefore: start.addingTimeInterval(1))
        let out = harness.send(.loaded(["q1": [entry]], requested: ["q1"]))
        harness.machine.now = .seconds(2)
        let timer = try #require(out.timers.first)
        let read = try #require(harness.send(.timerFired(timer.token)).scheduleReads.first)
        let last = TaskScheduleEntry(queueName: "q1", notBefore: start.addingTimeInterval(1), position: entry.task.position)
        let more = harness.send(.scheduled(["q1"], last: last, through: read.through, next: nil, complete: false))
        #expect(more.runs == ["a"])
        #expect(more.scheduleReads.map(\.after) == [last], "read on after the last entry, at once")
        #expect(more.timers.isEmpty)
    }

    @Test func aParkedQueueMayBeForgottenAndTheScheduleReadsItAgain() throws {
        let forgotten = EventCollector<[String]>()
        var harness = MachineHarness(keepsIdleQueuesUpTo: 1, forgets: { forgotten.record($0) }, wallClockAnchor: start)
        _ = harness.send(.start(["q1", "q2"]))
        let parked = harness.entry("a", "q1", notBefore: start.addingTimeInterval(30))
        let other = harness.entry("b", "q2", notBefore: start.addingTimeInterval(60))
        let out = harness.send(.loaded(["q1": [parked], "q2": [other]], requested: ["q1", "q2"]))
        // More queues than the broker keeps: a sweep forgets what waits only for its time.
        _ = harness.send(.changes((3...5).map { .saved(harness.entry("x\($0)", "q\($0)")) }))
        #expect(forgotten.values.flatMap { $0 }.sorted() == ["q1", "q2"], "queues that wait only for their time are forgotten")
        #expect(harness.machine.queues.keys.sorted() == ["q3", "q4", "q5"])

        harness.machine.now = .seconds(30)
        let timer = try #require(out.timers.first)
        let read = try #require(harness.send(.timerFired(timer.token)).scheduleReads.first)
        let back = harness.send(.scheduled(["q1"], last: nil, through: read.through, next: start.addingTimeInterval(60), complete: true))
        #expect(back.loads == [["q1"]], "a forgotten queue whose time came is read again")
        #expect(harness.send(MachineHarness.loaded("q1", [parked])).runs == ["a"])
    }

    @Test func aFailedScheduleReadIsTriedAgainAfterABackoff() throws {
        var harness = MachineHarness(wallClockAnchor: start)
        _ = harness.send(.start(["q1"]))
        let out = harness.send(MachineHarness.loaded("q1", [harness.entry("a", "q1", notBefore: start.addingTimeInterval(1))]))
        harness.machine.now = .seconds(1)
        let timer = try #require(out.timers.first)
        #expect(harness.send(.timerFired(timer.token)).scheduleReads.count == 1)
        let failed = harness.send(.scheduleFailed(message: "disk gone"))
        #expect(failed.storageFailures == ["load  0.1 seconds"])
        let retry = try #require(failed.timers.first)
        #expect(retry.delay == .after(.milliseconds(100)))
        #expect(harness.send(.timerFired(retry.token)).scheduleReads.count == 1)
    }

    @Test func readyQueuesTakeSlotsByPriorityThenInTheOrderTheyBecameReady() {
        var harness = MachineHarness(maxConcurrentQueues: 1)
        _ = harness.send(.start(["q1", "q2", "q3"]))
        let low = harness.entry("low", "q1")
        let high1 = harness.entry("high1", "q2", storedPriority: 5)
        let high2 = harness.entry("high2", "q3", storedPriority: 5)
        let high1b = harness.entry("high1b", "q2", storedPriority: 5)
        let first = harness.send(.loaded(["q1": [low], "q2": [high1, high1b], "q3": [high2]], requested: ["q1", "q2", "q3"]))
        #expect(first.runs == ["high1"])
        let second = harness.send(.stored([.success(high1)]))
        #expect(second.runs == ["high2"], "a queue that ran goes behind the others of its priority")
        let third = harness.send(.stored([.success(high2)]))
        #expect(third.runs == ["high1b"])
        #expect(harness.send(.stored([.success(high1b)])).runs == ["low"])
    }
}
