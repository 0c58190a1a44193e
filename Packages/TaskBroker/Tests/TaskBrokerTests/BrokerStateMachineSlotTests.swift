import Foundation
@testable import TaskBrokerCore
import Testing

/// A queue's standing with the broker's slots and its lease is one value (`Queue.Slot`): the
/// machine moves it only along the documented transitions, and what it decides follows from it.
@Suite struct BrokerStateMachineSlotTests {
    typealias Queue = BrokerStateMachine.Queue

    /// One slot's derived answers: whether the head may take a slot, whether the queue may be
    /// forgotten, what it waits for.
    private struct Reading: Equatable {
        var mayTakeSlot: Bool
        var slotIsIdle: Bool
        var inFlight: Bool
        var keptLease: Bool
        var hasNextClaim: Bool
        var leaseWait: UInt64?

        init(_ queue: Queue) {
            mayTakeSlot = queue.mayTakeSlot
            slotIsIdle = queue.slotIsIdle
            inFlight = queue.inFlight
            keptLease = queue.keptLease
            hasNextClaim = queue.nextClaim != nil
            leaseWait = queue.leaseWait
        }

        init(mayTakeSlot: Bool, slotIsIdle: Bool, inFlight: Bool = false, keptLease: Bool = false, hasNextClaim: Bool = false, leaseWait: UInt64? = nil) {
            self.mayTakeSlot = mayTakeSlot
            self.slotIsIdle = slotIsIdle
            self.inFlight = inFlight
            self.keptLease = keptLease
            self.hasNextClaim = hasNextClaim
            self.leaseWait = leaseWait
        }
    }

    /// A next head's claim, under timer 7.
    private static var claim: Queue.NextClaim {
        var h = MachineHarness()
        let next = h.entry("b", "q")
        return Queue.NextClaim(id: next.id, revision: next.task.revision, timer: 7, deadline: .seconds(3))
    }

    @Test func eachSlotAnswersWhatTheMachineAsksOfIt() {
        func reading(_ slot: Queue.Slot) -> Reading {
            var queue = Queue()
            queue.slot = slot
            return Reading(queue)
        }
        #expect(reading(.free) == Reading(mayTakeSlot: true, slotIsIdle: true))
        #expect(reading(.kept(epoch: 3, next: nil)) == Reading(mayTakeSlot: true, slotIsIdle: true, keptLease: true))
        #expect(reading(.kept(epoch: 3, next: Self.claim)) == Reading(mayTakeSlot: true, slotIsIdle: false, keptLease: true, hasNextClaim: true))
        #expect(reading(.inFlight(Queue.Flight())) == Reading(mayTakeSlot: false, slotIsIdle: false, inFlight: true))
        #expect(reading(.claimRetry) == Reading(mayTakeSlot: false, slotIsIdle: false))
        #expect(reading(.leaseWait(timer: 4)) == Reading(mayTakeSlot: false, slotIsIdle: false, leaseWait: 4))
    }

    /// What happens while in flight is kept with the flight and handed over when it ends: a new
    /// flight starts with none of it.
    @Test func whatHappensInFlightEndsWithTheFlight() throws {
        var queue = Queue()
        queue.slot = .kept(epoch: 3, next: Self.claim)
        let began = queue.beginFlight()
        #expect(began)
        #expect(queue.inFlight && !queue.keptLease && queue.nextClaim == nil, "a kept lease and its claim are spent")
        #expect(queue.flight?.epoch == 3 && queue.leaseEpoch == 3, "the head runs under the kept lease's epoch until claimed anew")
        queue.updateFlight { $0.leaseLost = true }
        queue.updateFlight { $0.readAfterOutcome = true }
        queue.markContinued(sentAt: .seconds(5))
        let endedFlight = queue.endFlight(to: .leaseWait(timer: 9))
        let ended = try #require(endedFlight)
        #expect(ended.leaseLost && ended.readAfterOutcome && ended.continuedAt == .seconds(5) && !ended.outdated && !ended.letGo)
        #expect(queue.leaseWait == 9)
        // Notes made with nothing in flight change nothing.
        queue.updateFlight { $0.outdated = true }
        queue.markContinued(sentAt: .seconds(6))
        #expect(queue.leaseWait == 9)
        let endedByAnotherTimer = queue.endLeaseWait(timer: 8)
        #expect(!endedByAnotherTimer, "another timer's wait is not this one's")
        let endedByItsTimer = queue.endLeaseWait(timer: 9)
        #expect(endedByItsTimer)
        let beganAgain = queue.beginFlight()
        #expect(beganAgain)
        let freshFlight = queue.endFlight(to: .claimRetry)
        let fresh = try #require(freshFlight)
        #expect(!fresh.leaseLost && !fresh.readAfterOutcome && fresh.continuedAt == nil && !fresh.outdated)
        #expect(fresh.epoch == nil, "begun from free, the flight holds no lease until a claim grants one")
        queue.endClaimRetry()
        #expect(Reading(queue) == Reading(mayTakeSlot: true, slotIsIdle: true))
    }

    @Test func aNextHeadsClaimIsDroppedOnlyByItsOwnTimer() {
        var queue = Queue()
        queue.slot = .kept(epoch: 5, next: Self.claim)
        queue.setNextClaimTimer(11)
        queue.dropNextClaim(startedBy: 7)
        #expect(queue.nextClaim?.timer == 11, "the claim's timer is the one set last")
        queue.dropNextClaim(startedBy: 11)
        #expect(queue.keptLease && queue.nextClaim == nil && queue.leaseEpoch == 5, "the lease stays kept, under its epoch")
        queue.slot = .kept(epoch: 6, next: Self.claim)
        queue.forgetNextClaim()
        #expect(queue.keptLease && queue.nextClaim == nil && queue.leaseEpoch == 6)
        let released = queue.releaseKeptLease()
        #expect(released == 6, "the kept lease is let go under its epoch")
        #expect(queue.leaseEpoch == nil)
        #expect(Reading(queue) == Reading(mayTakeSlot: true, slotIsIdle: true))
    }

    /// A flight ended with nothing in flight, a second flight begun on the first, a flight that
    /// ends in a flight, a lease let go that was not kept: each is refused and leaves the queue as
    /// it was (the machine counts them; `MachineHarness` checks after every input that none happened).
    @Test func anImpossibleTransitionIsRefusedAndChangesNothing() {
        var queue = Queue()
        let endedFree = queue.endFlight()
        #expect(endedFree == nil)
        let released = queue.releaseKeptLease()
        #expect(released == nil, "free keeps no lease")
        #expect(Reading(queue) == Reading(mayTakeSlot: true, slotIsIdle: true))
        let began = queue.beginFlight()
        #expect(began)
        queue.updateFlight { $0.letGo = true }
        let beganAgain = queue.beginFlight()
        #expect(!beganAgain, "a queue runs one action at a time")
        let endedInAFlight = queue.endFlight(to: .inFlight(Queue.Flight()))
        #expect(endedInAFlight == nil, "a flight ends in another standing")
        #expect(queue.flight?.letGo == true, "the flight is the one begun first, untouched")
        queue.slot = .leaseWait(timer: 3)
        let beganWhileWaiting = queue.beginFlight()
        #expect(!beganWhileWaiting, "a queue whose lease another worker holds takes no slot")
        let releasedWhileWaiting = queue.releaseKeptLease()
        #expect(releasedWhileWaiting == nil)
        #expect(queue.leaseWait == 3)
        queue.slot = .claimRetry
        let endedRetry = queue.endFlight()
        #expect(endedRetry == nil)
        #expect(!queue.mayTakeSlot, "still waiting for the claim's retry")

        // Through the machine: counted, and the slot count untouched.
        var h = MachineHarness()
        var state = Queue()
        h.machine.endFlight(&state)
        #expect(h.machine.refusedTransitions == 1)
        #expect(h.machine.running == 0)
    }

    /// The machine walks a queue of a shared backend through every slot: a claim held by another
    /// worker waits for that lease, a failed claim for its retry, a finish that claims the next
    /// head keeps the lease, and a stopping broker lets a kept lease go.
    @Test func aSharedQueueWalksThroughEverySlot() throws {
        var h = MachineHarness(claimsHeads: true)
        let a = h.entry("a", "q")
        let b = h.entry("b", "q")
        let c = h.entry("c", "q")
        func slot(_ h: MachineHarness) -> Reading? { h.machine.queues["q"].map(Reading.init) }
        _ = h.send(.start(["q"]))
        #expect(h.send(MachineHarness.loaded("q", [a, b, c])).claims == [["a"]])
        #expect(slot(h) == Reading(mayTakeSlot: false, slotIsIdle: false, inFlight: true), "claiming holds a slot")

        let held = h.send(.claimed([a.task], results: [.heldElsewhere(until: Date(timeIntervalSince1970: 2_000))]))
        let wait = try #require(held.timers.first?.token)
        #expect(slot(h) == Reading(mayTakeSlot: false, slotIsIdle: false, leaseWait: wait))
        #expect(h.machine.running == 0, "waiting for another worker's lease holds no slot")
        #expect(h.send(.timerFired(wait)).claims == [["a"]])

        let failed = h.send(.claimFailed([a.task], message: "connection reset"))
        #expect(slot(h) == Reading(mayTakeSlot: false, slotIsIdle: false))
        #expect(h.send(.timerFired(try #require(failed.timers.first).token)).claims == [["a"]])

        #expect(h.send(.claimed([a.task], results: [.granted()])).runs == ["a"])
        #expect(h.send(.continued(["q"]), .stored([.success(a, next: b)])).runs == ["b"], "b starts on the finish's claim")
        #expect(slot(h)?.inFlight == true)
        let kept = h.send(.continued(["q"]), .stored([.success(b, next: c)]))
        #expect(kept.runs == ["c"])
        // c's outcome keeps the lease for nothing (no next head): the broker holds it idle.
        _ = h.send(.continued(["q"]), .stored([.success(c)]))
        #expect(slot(h) == Reading(mayTakeSlot: true, slotIsIdle: true, keptLease: true))
        let stopping = h.send(.shutdown)
        #expect(stopping.releases == [["q"]], "a stopping broker lets the kept lease go")
        #expect(slot(h) == Reading(mayTakeSlot: true, slotIsIdle: true))
    }
}
