import Foundation
import Testing
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker

/// A queue read again while its head's claim runs (shared backends): what the claim answers must
/// not undo the read under way, and a lease reported lost meanwhile must not stall the queue.
struct BrokerStateMachineRereadTests {
    /// Two changes arrive while the claim of `a` runs: the first starts a read, the second (a
    /// save of `c`, after that read's snapshot) asks for one more. The claim then answers
    /// `.changed`. It used to start a second read and forget the first one's "read again": the
    /// first read's answer (without `c`) was applied, the second's dropped, and `c` stayed
    /// stored, never run, until the queue changed again.
    @Test func aRefusedClaimDuringARereadKeepsTheReadAgainThatIsAsked() throws {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a])).claims == [["a"]])
        #expect(h.send(.changes([.reload(["q"])])).loads == [["q"]], "a replaced: read the queue")
        #expect(h.send(.changes([.reload(["q"])])).loads.isEmpty, "c saved: read it again after this read")
        let refused = h.send(.claimed([a.task], results: [.changed]))
        #expect(refused.loads.isEmpty, "a read is already under way")
        let a2 = h.resaved(a)
        let c = h.entry("c", "q")
        #expect(h.send(MachineHarness.loaded("q", [a2])).loads == [["q"]], "the read from before c's save is read again")
        #expect(h.send(MachineHarness.loaded("q", [a2, c])).claims == [["a"]])
        #expect(h.send(.claimed([a2.task], results: [.granted()])).runs == ["a"])
        #expect(h.send(.stored([.success(a2)])).claims == [["c"]], "c runs")
    }

    /// A run whose handler got to start too late for its claim (the process stalled between the
    /// decision and the start) does not run: the queue gives its slot back, is read again and its
    /// head claimed anew, and the run ends as a lost lease. (The PostgreSQL stall test once saw
    /// such a run start on the stalled worker while the taker ran the queue.)
    @Test func aRunThatStartsTooLateForItsClaimIsClaimedAgain() throws {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q2")
        _ = h.send(.start(["q", "q2"]))
        #expect(h.send(MachineHarness.loaded("q", [a]), MachineHarness.loaded("q2", [b])).claims == [["a"]])
        #expect(h.send(.claimed([a.task], results: [.granted()])).runs == ["a"])
        let late = h.send(.notStarted([a.task]))
        #expect(late.events == [.leaseLost(queueName: "q", key: "a", collection: a.task.collection)])
        #expect(late.loads == [["q"]], "the queue is read again")
        #expect(late.claims == [["b"]], "its slot went to the next queue")
        _ = h.send(.claimed([b.task], results: [.granted()]))
        _ = h.send(.stored([.success(b)]))
        #expect(h.send(MachineHarness.loaded("q", [a])).claims == [["a"]], "claimed anew once read")
        // Another version of the head (or none) in flight: a late report about `a` changes nothing.
        #expect(h.send(.notStarted([b.task])).events.isEmpty)
    }

    /// A claim that finds the head changed (another worker ran it meanwhile) reads the queue again.
    /// The queue had its turn in the line: once read, it goes first, not behind every queue that
    /// became ready meanwhile. At the back, a takeover after a lease expired (whose claim finds the
    /// head changed whenever the dead holder had run more of the queue) waited a whole turn of a
    /// worker at its cap again (up to 0.6 s in the PostgreSQL crash test). Once: when the claim
    /// that went first finds the head changed again, the queue goes to the back, so that a head
    /// replaced again and again cannot keep the other queues waiting.
    @Test func aQueueReadBecauseItsClaimFoundTheHeadChangedIsClaimedFirstOnceRead() {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let b = h.entry("b", "q")
        let c = h.entry("c", "r")
        let d = h.entry("d", "s")
        _ = h.send(.start(["q", "r", "s"]))
        #expect(h.send(MachineHarness.loaded("q", [b])).claims == [["b"]])
        _ = h.send(MachineHarness.loaded("r", [c]), MachineHarness.loaded("s", [d]))
        let refused = h.send(.claimed([b.task], results: [.changed]))
        #expect(refused.loads == [["q"]], "q is read again")
        #expect(refused.claims == [["c"]], "the freed slot goes to the next queue in the line")
        #expect(h.send(.claimed([c.task], results: [.granted()])).runs == ["c"])
        let b2 = h.entry("b2", "q")
        #expect(h.send(MachineHarness.loaded("q", [b2])).claims.isEmpty, "no free slot")
        #expect(h.send(.stored([.success(c)])).claims == [["b2"]], "q goes before s, which waited behind it")
        // Once only: the head replaced again meanwhile, q goes to the back this time.
        let again = h.send(.claimed([b2.task], results: [.changed]))
        #expect(again.loads == [["q"]])
        #expect(again.claims == [["d"]])
        #expect(h.send(.claimed([d.task], results: [.granted()])).runs == ["d"])
        let b3 = h.entry("b3", "q")
        let e = h.entry("e", "r")
        _ = h.send(.changes([.saved(e)]))
        _ = h.send(MachineHarness.loaded("q", [b3]))
        #expect(h.send(.stored([.success(d)])).claims == [["e"]], "r, ready before q was read, goes first")
        #expect(h.send(.claimed([e.task], results: [.granted()])).runs == ["e"])
        #expect(h.send(.stored([.success(e)])).claims == [["b3"]])
    }

    /// A lease reported lost while the queue's head is being claimed: the queue is read again
    /// and claimed anew. It used to be marked released for an outcome that never came (the head
    /// never started), so every later claim was granted and not used, in a loop, and the queue
    /// never ran again.
    @Test func aLeaseLostWhileTheHeadIsClaimedRereadsTheQueueInsteadOfStallingIt() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a])).claims == [["a"]])
        #expect(h.send(.leaseLost(["q"])).loads.isEmpty, "the claim is still under way")
        let granted = h.send(.claimed([a.task], results: [.granted()]))
        #expect(granted.runs.isEmpty)
        #expect(granted.loads == [["q"]], "read the queue again")
        #expect(h.send(MachineHarness.loaded("q", [a])).claims == [["a"]])
        #expect(h.send(.claimed([a.task], results: [.granted()])).runs == ["a"])
    }

    /// The embedded backend's revisions follow its commits: a notice older than what a read saw is
    /// stale (PostgreSQL announces saves by queue, and its brokers read the queue again). A queue forgotten (idle, above the limit) and read anew must still skip it: `a`,
    /// run and completed, would otherwise run again when its late notice arrived.
    @Test func aForgottenQueueReadAnewSkipsALateNoticeOfAnActionItRan() {
        var h = MachineHarness(keepsIdleQueuesUpTo: 1)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a, b])).runs == ["a"])
        #expect(h.send(.stored([.success(a)])).runs == ["b"])
        _ = h.send(.stored([.success(b)]))
        _ = h.send(.changes([.saved(h.entry("x", "other"))]))
        #expect(h.machine.queues["q"] == nil, "q was forgotten")
        #expect(h.send(.changes([.saved(a)])).loads == [["q"]])
        #expect(h.send(MachineHarness.loaded("q", [])).runs.isEmpty, "a ran already")
    }

    /// A queue another broker of the process runs is not remembered as refused: once that broker
    /// lets it go (it forgot the queue, or stopped), the next change to it is taken.
    @Test func aQueueOwnedByAnotherBrokerIsAskedForAgainAtItsNextChange() {
        final class Owner { var other = true }
        let owner = Owner()
        var h = MachineHarness(acceptance: { _ in owner.other ? .ownedElsewhere : .runs })
        #expect(h.send(.changes([.saved(h.entry("a", "q"))])).loads.isEmpty, "the other broker runs q")
        owner.other = false
        #expect(h.send(.changes([.saved(h.entry("b", "q"))])).loads == [["q"]])
    }

    /// A restart heard while a read runs that is then issued again (an outcome was stored during
    /// it) is still reported once the last read is applied. The second read dropped the changes
    /// heard during the first, and the restart's `.resumed` with them (PostgreSQL: the
    /// restart-events test failed about one run in six).
    @Test func aRestartHeardDuringAReadThatIsIssuedAgainIsStillReported() {
        var h = MachineHarness()
        _ = h.send(.start(["q1"]))
        let a = h.entry("a", "q1")
        #expect(h.send(MachineHarness.loaded("q1", [a])).runs == ["a"])
        #expect(h.send(.changes([.reload(["q1"])])).loads == [["q1"]], "read while a runs")
        let failed = h.send(.stored([.failure(a, .waitForRestart, pause: .untilRestart)]))
        #expect(failed.events.contains(.failed(queueName: "q1", key: "a", collection: "c", result: .waitForRestart)))
        _ = h.send(.changes([.resumed(["q1"])]))
        #expect(h.send(MachineHarness.loaded("q1", [a])).loads == [["q1"]], "begun before the outcome: read again")
        var restarted = a
        restarted.task.attempts = 1
        let out = h.send(MachineHarness.loaded("q1", [restarted]))
        #expect(out.events.first == .resumed(queueName: "q1"), "\(out.events)")
        #expect(out.runs == ["a"])
    }
}
