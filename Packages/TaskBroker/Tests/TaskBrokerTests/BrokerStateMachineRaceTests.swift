import Foundation
import Testing
@testable import TaskBroker

/// Changes that reach the machine in an order that differs from what storage committed.
struct BrokerStateMachineRaceTests {
    /// The queue is restarted right after the finish that paused it (`waitForRestart`) was
    /// committed, and the restart is heard before that outcome is reported stored (SQLite announces
    /// the restart from its commit; the committer reports the finish once its write returns). The
    /// restart found nothing paused in memory, and the stored outcome then paused the queue in
    /// memory only: storage said it may run, the broker waited for another restart. Now the queue
    /// is read again once the outcome is stored, and runs.
    @Test func aRestartHeardBeforeThePauseItClearsIsStoredStillRunsTheQueue() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a])).runs == ["a"])
        _ = h.send(.changes([.resumed(["q"])]))
        let stored = h.send(.stored([.failure(a, .waitForRestart, pause: .untilRestart)]))
        #expect(stored.loads == [["q"]], "what storage holds now is read")
        var resumed = a
        resumed.task.attempts = 1
        #expect(h.send(MachineHarness.loaded("q", [resumed])).runs == ["a"], "the restarted action runs")
    }

    /// A read that answers while the action in flight shows that action's outcome already
    /// committed (its attempts grew) may also show what came after it (here: the restart): the
    /// queue is read again once the outcome is reported stored.
    @Test func aReadThatAlreadyShowsTheOutcomeInFlightIsReadAgainAfterIt() {
        var h = MachineHarness()
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a])).runs == ["a"])
        #expect(h.send(.changes([.reload(["q"])])).loads == [["q"]])
        var restarted = a
        restarted.task.attempts = 1
        _ = h.send(MachineHarness.loaded("q", [restarted]))
        #expect(h.send(.stored([.failure(a, .waitForRestart, pause: .untilRestart)])).loads == [["q"]])
        #expect(h.send(MachineHarness.loaded("q", [restarted])).runs == ["a"])
    }

    /// An action moved to another queue (saved again with the same key under another queue name)
    /// while its old queue is being read: the read, from before the move, still shows the old
    /// version. It used to take the action back from the new queue: the old version ran, and the
    /// new one stayed stored, unrun, until its queue was read again.
    @Test func aReadFromBeforeAMoveDoesNotTakeTheMovedActionBack() {
        var h = MachineHarness()
        let h0 = h.entry("h0", "new")
        let k1 = h.entry("k", "old")
        _ = h.send(.start(["old", "new"]))
        #expect(h.send(MachineHarness.loaded("new", [h0])).runs == ["h0"])
        var k2 = h.resaved(k1)
        k2.task.queueName = "new"
        _ = h.send(.changes([.saved(k2)]))
        #expect(h.send(MachineHarness.loaded("old", [k1])).runs.isEmpty, "the old version does not run")
        #expect(h.send(.stored([.success(h0)])).runs == ["k"], "the moved action runs in its new queue")
    }
}
