import Foundation
@testable import TaskBrokerCore
import Testing

/// Reads that take leases (shared backends, `LeaseAwareReads`): the machine asks a read for as
/// many leases as it has free slots, starts the heads of the queues whose lease the read took
/// without a claim, and lets go of any lease it cannot use at once.
@Suite struct BrokerStateMachineReadClaimTests {
    @Test func aReadAsksForAsManyLeasesAsTheBrokerHasFreeSlots() {
        var h = MachineHarness(maxConcurrentQueues: 3, claimsHeads: true)
        let first = h.send(.start(["p", "q"]))
        #expect(first.loads == [["p", "q"]])
        #expect(first.loadBudgets == [3], "nothing runs yet: every slot is free")
        let a = h.entry("a", "p")
        let running = h.send(.loaded(["p": [a]], requested: ["p", "q"], claimed: ["p": 5]))
        #expect(running.runs == ["a"])
        // A queue read again while `a` runs: one slot is taken.
        #expect(h.send(.changes([.reload(["r"])])).loadBudgets == [2])
    }

    @Test func aBackendWithoutLeasesIsAskedForNone() {
        var h = MachineHarness(maxConcurrentQueues: 3, claimsHeads: false)
        #expect(h.send(.start(["p"])).loadBudgets == [0])
    }

    @Test func aHeadWhoseLeaseTheReadTookStartsWithoutAClaim() {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        let read = h.send(.loaded(["q": [a, b]], requested: ["q"], claimed: ["q": 7]))
        #expect(read.claims.isEmpty, "no claim: the read holds the lease")
        #expect(read.runs == ["a"])
        #expect(read.runEpochs == [7], "under the epoch the read took")
        #expect(read.nextHeads == ["b"], "its finish claims the next head, as after any claim")
        #expect(read.releasedLeases.isEmpty, "the lease is in use")
        // Its outcome stored, the next head starts on the lease the finish kept.
        let stored = h.send(.continued(["q"]), .stored([.success(a, next: b)]))
        #expect(stored.runs == ["b"] && stored.claims.isEmpty)
        #expect(stored.runEpochs == [7])
    }

    @Test func aLeaseTheBrokerHasNoSlotForIsLetGoAtOnce() {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "p")
        let b = h.entry("b", "q")
        _ = h.send(.start(["p", "q"]))
        let read = h.send(.loaded(["p": [a], "q": [b]], requested: ["p", "q"], claimed: ["p": 3, "q": 4]))
        #expect(read.runs == ["a"], "the one slot runs the first queue on its lease")
        #expect(read.releasedLeases == [[TaskQueueLease(queueName: "q", epoch: 4)]], "the other lease is let go for the pool")
        // Once a slot is free, `q`'s head is claimed as any other.
        let stored = h.send(.stored([.success(a)]))
        #expect(stored.claims == [["b"]])
    }

    @Test func aLeaseForAHeadThatMayNotRunNowIsLetGo() {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        let a = h.entry("a", "q", pause: .untilRestart)
        _ = h.send(.start(["q"]))
        let read = h.send(.loaded(["q": [a]], requested: ["q"], claimed: ["q": 2]))
        #expect(read.runs.isEmpty && read.claims.isEmpty, "a head paused until restarted does not run")
        #expect(read.releasedLeases == [[TaskQueueLease(queueName: "q", epoch: 2)]])
    }

    @Test func aLeaseTakenByAReadThatIsReadAgainIsLetGo() {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        // Something that cannot be replayed changed the queue while it was read: read once more.
        #expect(h.send(.changes([.reload(["q"])])).loads.isEmpty, "the read under way reads again when it answers")
        let read = h.send(.loaded(["q": [a]], requested: ["q"], claimed: ["q": 9]))
        #expect(read.runs.isEmpty, "what that read saw is stale")
        #expect(read.releasedLeases == [[TaskQueueLease(queueName: "q", epoch: 9)]])
        #expect(read.loads == [["q"]], "and the queue is read again")
    }

    @Test func aReadAnsweredTooLateLetsItsLeaseGoAndClaimsTheHead() {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        // The harness's claim lifetime is 3 s: the process stalled for 4 s after the read was sent.
        h.machine.now = .seconds(4)
        let read = h.send(.loaded(["q": [a]], requested: ["q"], claimed: ["q": 4], sentAt: .zero))
        #expect(read.releasedLeases == [[TaskQueueLease(queueName: "q", epoch: 4)]], "the lease may have expired")
        #expect(read.claims == [["a"]], "the head is claimed anew")
        #expect(read.runs.isEmpty)
    }

    @Test func aStoppingBrokerWaitsForItsReadsThatMayTakeLeasesAndLetsThemGo() {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        let stopping = h.send(.shutdown)
        #expect(!stopping.contains { if case .finish = $0 { true } else { false } }, "the read of `q` may take its lease: not finished")
        let read = h.send(.loaded(["q": [a]], requested: ["q"], claimed: ["q": 6]))
        #expect(read.runs.isEmpty, "a stopping broker starts nothing")
        #expect(read.releasedLeases == [[TaskQueueLease(queueName: "q", epoch: 6)]], "it lets go of the lease the read took")
        #expect(read.contains { if case .finish = $0 { true } else { false } }, "and then finishes")
    }

    @Test func aStoppingBrokerWhoseReadFailedFinishes() {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        _ = h.send(.start(["q"]))
        _ = h.send(.shutdown)
        let failed = h.send(.loadFailed(["q"], message: "the server went away"))
        #expect(failed.contains { if case .finish = $0 { true } else { false } }, "a failed read took nothing")
    }

    @Test func aBrokerWithEveryQueueReadyOrRunningAsksForNoLease() {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "p")
        let b = h.entry("b", "q")
        _ = h.send(.start(["p"]))
        _ = h.send(.loaded(["p": [a]], requested: ["p"], claimed: ["p": 1]))
        let reload = h.send(.changes([.reload(["q"])]))
        #expect(reload.loadBudgets == [0], "its one slot runs `p`")
        let read = h.send(.loaded(["q": [b]], requested: ["q"]))
        #expect(read.runs.isEmpty && read.claims.isEmpty, "`q` waits for the slot")
        #expect(h.send(.stored([.success(a)])).claims == [["b"]], "and is claimed once it is free")
    }
}

/// Claims of heads the broker read (shared backends): what a refused or late claim leaves behind.
@Suite struct BrokerStateMachineClaimTests {
    @Test func aHeadToClaimReadsAheadOnlyOnceItsClaimIsGranted() throws {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        let a = h.entry("a", "p")
        let b = h.entry("b", "q")
        _ = h.send(.start(["p", "q"]))
        // Read while another worker held both: their heads alone, and a wait for that lease.
        let until = Date(timeIntervalSince1970: 1_000)
        let read = h.send(.loaded(["p": [a], "q": [b]], requested: ["p", "q"], truncated: ["p", "q"], heldElsewhere: ["p": until, "q": until]))
        #expect(read.claims.isEmpty && read.readAheads.isEmpty)
        let waits = read.timers.filter { $0.delay == .until(until) }.map(\.token)
        try #require(waits.count == 2)
        let expired = h.send(.timerFired(waits[0]), .timerFired(waits[1]))
        #expect(expired.claims.map(Set.init) == [["a", "b"]], "the leases' end: both heads are claimed")
        #expect(expired.readAheads.isEmpty, "no read ahead while the claims may be refused")
        let answered = h.send(.claimed([a.task, b.task], results: [.granted(epoch: 1), .heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        #expect(answered.runs == ["a"])
        #expect(answered.readAheads == ["p>\(a.task.position)"], "the granted queue reads ahead; the refused one reads nothing")
    }

    @Test func aClaimGrantedTooLateLetsItsLeaseGoAndReadsTheQueueAgain() {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        #expect(h.send(.loaded(["q": [a]], requested: ["q"])).claims == [["a"]])
        // The harness's claim lifetime is 3 s: the answer is handled 4 s after the claim was sent.
        h.machine.now = .seconds(4)
        let late = h.send(.claimed([a.task], results: [.granted(epoch: 5)], sentAt: .zero))
        #expect(late.runs.isEmpty, "the lease may have expired: nothing starts on it")
        #expect(late.releasedLeases == [[TaskQueueLease(queueName: "q", epoch: 5)]], "it is let go, not left to expire")
        #expect(late.loads == [["q"]], "and the queue is read again")
    }
}
