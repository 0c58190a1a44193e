import Foundation
@testable import TaskBrokerCore
import Testing

/// The machine decides which leases are renewed and when (shared backends): the queues whose
/// actions run, every third of the lease on the real clock, one renewal at a time.
@Suite struct BrokerStateMachineRenewalTests {
    private static let interval = Duration.seconds(3)

    /// The delays of the renewal timers among `out`'s timers.
    private static func renewalTimers(_ out: [MachineHarness.Output], _ h: MachineHarness) -> [(token: UInt64, delay: BrokerStateMachine.TimerDelay)] {
        out.timers.filter { timer in
            if case .renewal? = h.machine.timers[timer.token] { true } else { false }
        }
    }

    @Test func theLeasesOfRunningActionsAreRenewedEveryIntervalFromTheStartOfTheLast() throws {
        var h = MachineHarness(claimsHeads: true, renewalInterval: Self.interval)
        let a = h.entry("a", "q1")
        let b = h.entry("b", "q2")
        let c = h.entry("c", "q3")
        _ = h.send(.start(["q1", "q2", "q3"]))
        let claiming = h.send(MachineHarness.loaded("q1", [a]), MachineHarness.loaded("q2", [b]), MachineHarness.loaded("q3", [c]))
        let first = try #require(Self.renewalTimers(claiming, h).first, "the first flight schedules a renewal")
        #expect(first.delay == .realTime(Self.interval), "on the real clock: a lease expires on the server's")
        // q3's claim is still under way when the renewal comes: storage holds no lease of this
        // worker's for it, and it is not renewed.
        _ = h.send(.claimed([a.task, b.task], results: [.granted(), .granted()]))
        let due = h.send(.timerFired(first.token))
        #expect(due.renewals == [["q1", "q2"]])
        #expect(h.machine.renewal == .underWay)
        #expect(Self.renewalTimers(h.send(.claimed([c.task], results: [.granted()])), h).isEmpty, "one renewal at a time")

        // It took 1 s: the next one comes 2 s later, a third of the lease after it began.
        let sent = [TaskQueueLease(queueName: "q1", epoch: 0), TaskQueueLease(queueName: "q2", epoch: 0)]
        let next = try #require(Self.renewalTimers(h.send(.renewed(lost: [], sent: sent, took: .seconds(1))), h).first)
        #expect(next.delay == .realTime(.seconds(2)))
        #expect(h.send(.timerFired(next.token)).renewals == [["q1", "q2", "q3"]])
    }

    @Test func aFailedRenewalIsTriedAgainSoonAndALostLeaseRefusesTheOutcome() throws {
        var h = MachineHarness(claimsHeads: true, renewalInterval: Self.interval)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        let claiming = h.send(MachineHarness.loaded("q", [a]))
        _ = h.send(.claimed([a.task], results: [.granted()]))
        #expect(h.send(.timerFired(try #require(Self.renewalTimers(claiming, h).first).token)).renewals == [["q"]])
        let retry = try #require(Self.renewalTimers(h.send(.renewFailed), h).first)
        #expect(retry.delay == .realTime(.milliseconds(500)), "the configured retry, a twelfth of the lease")
        #expect(h.send(.timerFired(retry.token)).renewals == [["q"]])
        // Another worker took q over: its outcome is refused and the queue read again.
        let lease = TaskQueueLease(queueName: "q", epoch: 0)
        _ = h.send(.renewed(lost: [lease], sent: [lease], took: .milliseconds(10)))
        let refused = h.send(.stored([.success(a)]))
        #expect(refused.events == [.leaseLost(queueName: "q", key: "a", collection: "c")])
        #expect(refused.loads == [["q"]])
    }

    /// Nothing in flight, no renewal timer: it is cancelled once the last flight ends, and starts
    /// again with the next flight. A broker that renews nothing (one machine's store) starts none.
    @Test func anIdleBrokerRenewsNothingAndKeepsNoRenewalTimer() throws {
        var h = MachineHarness(claimsHeads: true, renewalInterval: Self.interval)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        let claiming = h.send(MachineHarness.loaded("q", [a]))
        let timer = try #require(Self.renewalTimers(claiming, h).first)
        _ = h.send(.claimed([a.task], results: [.granted()]))
        let idle = h.send(.stored([.success(a)]))
        #expect(idle.cancelledTimers == [timer.token])
        #expect(h.machine.renewal == .idle && h.machine.timers.isEmpty)
        #expect(h.send(.timerFired(timer.token)).renewals.isEmpty, "a cancelled timer that fired anyway renews nothing")
        let b = h.entry("b", "q")
        let again = h.send(.changes([.saved(b)]))
        #expect(again.claims == [["b"]])
        #expect(Self.renewalTimers(again, h).map(\.delay) == [.realTime(Self.interval)])

        var local = MachineHarness(renewalInterval: nil)
        let c = local.entry("c", "q")
        _ = local.send(.start(["q"]))
        let runs = local.send(MachineHarness.loaded("q", [c]))
        #expect(runs.runs == ["c"])
        #expect(runs.timers.isEmpty && local.machine.renewal == .idle)
    }

    /// A stopping broker still renews the leases of the actions it lets finish.
    @Test func aStoppingBrokerRenewsWhatStillRuns() throws {
        var h = MachineHarness(claimsHeads: true, renewalInterval: Self.interval)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        let claiming = h.send(MachineHarness.loaded("q", [a]))
        _ = h.send(.claimed([a.task], results: [.granted()]))
        _ = h.send(.shutdown)
        #expect(h.send(.timerFired(try #require(Self.renewalTimers(claiming, h).first).token)).renewals == [["q"]])
        #expect(h.send(.stored([.success(a)])).finishes)
    }
    /// The epoch a claim was granted under goes with the run (its outcome carries it), names the
    /// lease in renewals, stays with a lease a finish kept for the next head (which runs under it
    /// without a claim), and names the lease the broker lets go as it stops.
    @Test func theGrantedEpochTravelsWithTheRunItsRenewalsTheKeptLeaseAndItsRelease() throws {
        var h = MachineHarness(claimsHeads: true, renewalInterval: Self.interval)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        let claiming = h.send(MachineHarness.loaded("q", [a, b]))
        let started = h.send(.claimed([a.task], results: [.granted(epoch: 7)]))
        #expect(started.runs == ["a"] && started.runEpochs == [7], "the run carries its claim's epoch")
        let due = h.send(.timerFired(try #require(Self.renewalTimers(claiming, h).first).token))
        let lease = TaskQueueLease(queueName: "q", epoch: 7)
        #expect(due.renewedLeases == [[lease]], "renewed under the epoch it was granted")
        _ = h.send(.renewed(lost: [], sent: [lease], took: .milliseconds(5)))
        let next = h.send(.continued(["q"]), .stored([.success(a, next: b)]))
        #expect(next.runs == ["b"] && next.runEpochs == [7], "b runs on the kept lease, under a's epoch")
        _ = h.send(.continued(["q"]), .stored([.success(b)]))
        #expect(h.machine.queues["q"]?.leaseEpoch == 7, "the lease is kept under its epoch")
        #expect(h.send(.shutdown).releasedLeases == [[lease]], "let go under that epoch")
    }

    /// A renewal answers for the leases it was sent; the machine decides what each answer means
    /// for the queue as it stands now: a lease reported lost under an epoch the queue no longer
    /// runs under (claimed again since) is not this run's loss, and a lease the renewal extended
    /// after its outcome released it is let go again, so that other workers need not wait for it.
    @Test func aRenewalsAnswerIsReadAgainstTheEpochEachQueueHoldsNow() throws {
        var h = MachineHarness(claimsHeads: true, renewalInterval: Self.interval)
        let a = h.entry("a", "q1")
        let b = h.entry("b", "q2")
        _ = h.send(.start(["q1", "q2"]))
        let claiming = h.send(MachineHarness.loaded("q1", [a]), MachineHarness.loaded("q2", [b]))
        _ = h.send(.claimed([a.task, b.task], results: [.granted(epoch: 3), .granted(epoch: 5)]))
        let due = h.send(.timerFired(try #require(Self.renewalTimers(claiming, h).first).token))
        let sent = [TaskQueueLease(queueName: "q1", epoch: 3), TaskQueueLease(queueName: "q2", epoch: 5)]
        #expect(due.renewedLeases == [sent])
        // While the renewal runs, a's outcome is stored (its lease released), and q2 is claimed again
        // under a newer epoch after b's outcome.
        _ = h.send(.stored([.success(a)]))
        let c = h.entry("c", "q2")
        _ = h.send(.stored([.success(b)]))
        let reclaim = h.send(.changes([.saved(c)]))
        #expect(reclaim.claims == [["c"]])
        _ = h.send(.claimed([c.task], results: [.granted(epoch: 6)]))
        // Storage renewed q1's released lease (same owner, same epoch) and lost q2's old one.
        let answer = h.send(.renewed(lost: [sent[1]], sent: sent, took: .milliseconds(5)))
        #expect(answer.releasedAgain == [[sent[0]]], "q1's lease, released by its outcome, is let go again")
        #expect(answer.events.isEmpty && answer.loads.isEmpty, "q2's old lease was not c's: c runs on")
        let stored = h.send(.stored([.success(c)]))
        #expect(stored.events == [.succeeded(queueName: "q2", key: "c", collection: "c")], "c's outcome is not refused")
    }
}
