import Foundation
@testable import TaskBroker
import Testing

/// How the workers of a pool share queues (shared backends): a worker with room asks for queues
/// another holds, and a busy worker that heard it lets queues go instead of keeping them.
@Suite struct BrokerStateMachineSharingTests {
    @Test func aCompletionAnnouncedByTheHolderEndsTheWaitForItsLease() throws {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        let held = h.send(.claimed([a.task], results: [.heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        let timer = try #require(held.timers.first { $0.delay == .until(Date(timeIntervalSince1970: 2_000)) })
        // A holder that keeps the queue announces no completion: this one let the queue go.
        let completed = h.send(.changes([.completed(a.task)]))
        #expect(completed.cancelledTimers == [timer.token], "the wait for the lease ends")
        #expect(completed.claims == [["b"]], "the next head is claimed at once, not when the lease expires")
        #expect(h.send(.timerFired(timer.token)).isEmpty)
    }

    @Test func aWorkerWithRoomWhoseClaimIsRefusedAsksThePoolAtMostOnceAnInterval() throws {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        let until = Date(timeIntervalSince1970: 2_000)
        let a = h.entry("a", "q1")
        let b = h.entry("b", "q2")
        _ = h.send(.start(["q1", "q2"]))
        _ = h.send(MachineHarness.loaded("q1", [a]), MachineHarness.loaded("q2", [b]))
        let first = h.send(.claimed([a.task], results: [.heldElsewhere(until: until)]))
        #expect(first.asks == 1)
        #expect(first.room == [3], "three of its four slots are free")
        let pause = try #require(first.timers.first { $0.delay == .after(.seconds(3)) }, "no second ask for a third of the lease")
        #expect(h.send(.claimed([b.task], results: [.heldElsewhere(until: until)])).asks == 0, "still within the pause")
        // Once the pause ends, the refusal it saw is enough to ask again.
        #expect(h.send(.timerFired(pause.token)).asks == 1)
        #expect(h.send(.changes([.saved(h.entry("c", "q3"))])).asks == 0, "nothing refused since")
    }

    @Test func aWorkerWithoutRoomDoesNotAsk() {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "q1")
        let b = h.entry("b", "q2")
        _ = h.send(.start(["q1", "q2"]))
        #expect(h.send(MachineHarness.loaded("q1", [a]), MachineHarness.loaded("q2", [b])).claims == [["a"]])
        let refused = h.send(.claimed([a.task], results: [.heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        #expect(refused.claims == [["b"]], "the slot goes to the next queue at once")
        #expect(refused.asks == 0, "its one slot is taken")
    }

    @Test func aBusyWorkerLetsQueuesGoWithTheirOutcomesWhileAnotherHasRoom() throws {
        func busyWorker() -> (MachineHarness, [BrokerEntry]) {
            var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
            let entries = [h.entry("a1", "q"), h.entry("a2", "q"), h.entry("a3", "q"), h.entry("b1", "r"), h.entry("b2", "r")]
            _ = h.send(.start(["q", "r"]))
            _ = h.send(MachineHarness.loaded("q", Array(entries[..<3])), MachineHarness.loaded("r", Array(entries[3...])))
            return (h, entries)
        }
        // Alone, a busy worker keeps its queue for the next head, r waiting in the line or not.
        var (alone, _) = busyWorker()
        let a1Alone = try #require(alone.machine.queues["q"]?.waiting.first)
        #expect(alone.send(.claimed([a1Alone.task], results: [.granted])).nextHeads == ["a2"])

        var (h, e) = busyWorker()
        let asked = h.send(.changes([.spareCapacityElsewhere(room: 1)]))
        let sharing = try #require(asked.timers.first { $0.delay == .after(.seconds(10)) }, "for a lease")
        // r waits for this worker's one slot: q is let go with a1's outcome, for either worker to claim.
        #expect(h.send(.claimed([e[0].task], results: [.granted])).nextHeads == [nil])
        #expect(h.send(.stored([.success(e[0])])).claims == [["b1"]])
        #expect(h.send(.claimed([e[3].task], results: [.granted])).nextHeads == ["b2"], "the asker's room is used up: r is kept")
        // Another ask renews the time; once a lease has passed without one, queues are kept again.
        let again = h.send(.changes([.spareCapacityElsewhere(room: 2)]))
        #expect(again.cancelledTimers == [sharing.token])
        let renewed = try #require(again.timers.first)
        _ = h.send(.timerFired(renewed.token))
        #expect(h.send(.continued(["r"]), .stored([.success(e[3], next: e[4])])).claims == [["a2"]], "q waited in the line ahead of r")
        #expect(h.send(.claimed([e[1].task], results: [.granted])).nextHeads == ["a3"], "r waits in the line, but nobody asked")
    }
}
