import Foundation
import Testing
@testable import TaskBroker

/// Handing a queue over between workers (shared backends), as the state machine decides it: an
/// idle broker asks for the queues it finds held, a busy one lets an asked-for queue go at its next
/// finish and leaves it to the asker for a while, and an announced completion ends a wait for a lease.
struct BrokerStateMachineHandoverTests {
    /// A claim made while other queues wait for the broker's slot does not ask; one that leaves the
    /// line empty does. Once idle, the broker claims the queue it was refused while busy once
    /// more, asking; refused again, it waits for the lease (or a change), not asking again.
    @Test func aBrokerAsksForAQueueItWasRefusedWhileBusyOnceItIsIdle() throws {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "q")
        let x = h.entry("x", "r")
        _ = h.send(.start(["q", "r"]))
        let first = h.send(MachineHarness.loaded("q", [a]), MachineHarness.loaded("r", [x]))
        #expect(first.claims == [["a"]] && first.asking == [false], "r waits for the slot")
        let refused = h.send(.claimed([a.task], results: [.heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        #expect(refused.claims == [["x"]] && refused.asking == [true], "nothing else waits: the claim asks")
        _ = h.send(.claimed([x.task], results: [.granted]))
        let idle = h.send(.stored([.success(x)]))
        #expect(idle.claims == [["a"]] && idle.asking == [true], "idle: q is claimed again, asking")
        #expect(idle.cancelledTimers.count == 1, "q's wait for the lease ends while it is claimed")
        let again = h.send(.claimed([a.task], results: [.heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        #expect(again.claims.isEmpty, "asked once: q now waits for its lease or a change")
        #expect(again.timers.count == 1)
    }

    /// The broker's slot is taken and another queue waits: the run may hand its queue over. The
    /// finish did (`yielded`): the queue is not claimed again at once but after the next head's
    /// lifetime, unless it changes. Its own completion, heard late from its feed, changes nothing.
    @Test func aQueueHandedOverIsLeftToTheAskerForAWhile() throws {
        var h = MachineHarness(maxConcurrentQueues: 1, claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let x = h.entry("x", "r")
        _ = h.send(.start(["q", "r"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]), MachineHarness.loaded("r", [x]))
        let run = h.send(.claimed([a.task], results: [.granted]))
        #expect(run.runs == ["a"] && run.yielding == [true], "r waits for the slot")
        let handed = h.send(.yielded(["q"]), .stored([.success(a, next: b)]))
        #expect(handed.claims == [["x"]], "r takes the slot; q's next head is not claimed")
        let wait = try #require(handed.timers.first { if case .after = $0.delay { true } else { false } })
        #expect(h.send(.changes([.completed(a.task)])).isEmpty, "its own completion, heard late")
        _ = h.send(.claimed([x.task], results: [.granted]))
        #expect(h.send(.stored([.success(x)])).claims.isEmpty, "idle, but q is left to the asker")
        #expect(h.send(.timerFired(wait.token)).claims == [["b"]], "the asker did not take it: claimed again")
    }

    /// A completion is announced only when its worker let the queue's lease go: a broker waiting
    /// for that lease reads the queue (its copy may be stale) and claims it.
    @Test func anAnnouncedCompletionEndsTheWaitForItsQueuesLease() {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        _ = h.send(.start(["q"]))
        _ = h.send(MachineHarness.loaded("q", [a, b]))
        _ = h.send(.claimed([a.task], results: [.heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        let heard = h.send(.changes([.completed(a.task)]))
        #expect(heard.loads == [["q"]], "read again")
        #expect(heard.cancelledTimers.count == 1, "the wait for the lease ends")
    }
}
