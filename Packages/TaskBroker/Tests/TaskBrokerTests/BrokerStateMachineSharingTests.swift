import Foundation
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker
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
        func busyWorker() -> (MachineHarness, [String: BrokerEntry]) {
            var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
            var entries: [String: BrokerEntry] = [:]
            for (queue, prefix) in [("q", "a"), ("r", "b"), ("s", "c")] {
                let list = (1...3).map { h.entry("\(prefix)\($0)", queue) }
                for entry in list { entries[entry.task.key] = entry }
                _ = h.send(.start([queue]))
                _ = h.send(MachineHarness.loaded(queue, list))
            }
            return (h, entries)
        }
        // Alone, a busy worker keeps its queue for the next head, other queues waiting in the line or not.
        var (alone, a) = busyWorker()
        #expect(alone.send(.claimed([try #require(a["a1"]).task], results: [.granted()])).nextHeads == ["a2"])

        var (h, e) = busyWorker()
        func task(_ key: String) throws -> StoredTask { try #require(e[key]).task }
        let asked = h.send(.changes([.spareCapacityElsewhere(room: 1)]))
        let sharing = try #require(asked.timers.first { $0.delay == .after(.seconds(10)) }, "for a lease")
        // r and s wait for this worker's one slot: q is let go with a1's outcome, for the asker.
        #expect(h.send(.claimed([try task("a1")], results: [.granted()])).nextHeads == [nil])
        let stored = h.send(.stored([.success(try #require(e["a1"]))]))
        #expect(stored.claims == [["b1"]])
        // This worker leaves q alone for a twelfth of the lease, unless it changes, so that the
        // asker claims it first.
        let holdOff = try #require(stored.timers.first { $0.delay == .after(.seconds(2)) })
        #expect(h.send(.claimed([try task("b1")], results: [.granted()])).nextHeads == ["b2"], "the asker's room is used up: r is kept")
        // Then q goes back in the line, behind s (at the back: a takeover's claim goes first).
        #expect(h.send(.timerFired(holdOff.token)).claims.isEmpty, "the slot is busy")
        #expect(h.send(.continued(["r"]), .stored([.success(try #require(e["b1"]), next: e["b2"])])).claims == [["c1"]])
        // Another ask renews the time; once a lease has passed without one, queues are kept again.
        let again = h.send(.changes([.spareCapacityElsewhere(room: 2)]))
        #expect(again.cancelledTimers == [sharing.token])
        let renewed = try #require(again.timers.first)
        _ = h.send(.timerFired(renewed.token))
        #expect(h.send(.claimed([try task("c1")], results: [.granted()])).nextHeads == ["c2"], "q and r wait in the line, but nobody asked")
        #expect(h.send(.stored([.success(try #require(e["c1"]))])).claims == [["a2"]], "q's turn")
    }
}

/// A queue read while another worker of the pool holds its lease (shared backends read only its
/// head then): it waits for that lease as a refused claim does, without claiming.
@Suite struct BrokerStateMachineHeldReadTests {
    @Test func aQueueReadWhileAnotherWorkerHoldsItWaitsForThatLeaseWithoutAClaim() throws {
        var h = MachineHarness(maxConcurrentQueues: 4, claimsHeads: true)
        let until = Date(timeIntervalSince1970: 2_000)
        let a = h.entry("a", "q")
        _ = h.send(.start(["q"]))
        let read = h.send(.loaded(["q": [a]], requested: ["q"], truncated: ["q"], heldElsewhere: ["q": until]))
        #expect(read.claims.isEmpty, "no claim while another worker holds the queue")
        #expect(read.readAheads.isEmpty, "nor a read ahead of it")
        let timer = try #require(read.timers.first { $0.delay == .until(until) }, "it waits until that lease ends")
        #expect(read.asks == 1, "a worker with room asks the pool for queues, as after a refused claim")
        // The holder lets the queue go: its completion of `a` ends the wait; what this worker read
        // is gone, so it reads on, and claims the next head.
        let b = h.entry("b", "q")
        let completed = h.send(.changes([.completed(a.task)]))
        #expect(completed.cancelledTimers == [timer.token], "the wait ends when the holder lets the queue go")
        #expect(completed.readAheads == ["q>\(a.task.position)"], "it reads on after the completed head")
        let again = h.send(.readAhead(["q": [b]], tokens: completed.readAheadTokens))
        #expect(again.claims == [["b"]], "and claims its new head")
    }

    @Test func aQueueLetGoWhileItWasReadIsClaimedAtOnce() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        // Heard while the read runs: the holder let the queue go after the read's snapshot.
        _ = h.send(.changes([.completed(a.task)]))
        let read = h.send(.loaded(["q": [b]], requested: ["q"], truncated: ["q"], heldElsewhere: ["q": Date(timeIntervalSince1970: 2_000)]))
        #expect(read.claims == [["b"]], "claimed at once: the lease the read saw is gone")
    }
}
