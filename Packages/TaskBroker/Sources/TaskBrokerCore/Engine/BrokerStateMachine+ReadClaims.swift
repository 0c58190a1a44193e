import Foundation

// Reads that take leases (shared backends, `LeaseAwareReads`): how many a read may take, and which
// the broker keeps for their heads.
extension BrokerStateMachine {
    /// How many leases the reads the machine asks for now may take (shared backends): the slots
    /// free once the queues ready now have theirs. Reads under way share them, and are not set
    /// aside a slot per queue: most of their queues are held by another worker or empty, and such
    /// a reserve leaves later reads no budget (their free queues are then claimed one by one, after
    /// other workers' reads took them). A lease that finds no slot free when its read answers is
    /// let go.
    var readClaimBudget: Int {
        guard configuration.claimsHeads, phase == .running else { return 0 }
        return max(0, configuration.maxConcurrentQueues - running - ready.count)
    }

    /// Asks for the reads of `loadsToIssue`, with as many leases as the broker has free slots for.
    mutating func issueLoads(into out: inout [Output]) {
        let budget = readClaimBudget
        if budget > 0 { claimingReads.formUnion(loadsToIssue) }
        out.append(.load(loadsToIssue, claimBudget: budget))
    }

    /// Applies a read of queues (see ``loaded(_:_:truncated:paused:heldElsewhereUntil:claimedEpoch:sentAt:into:)``),
    /// and lets go, together, of the leases it took that the broker does not keep.
    mutating func loaded(
        _ byQueue: [String: [BrokerEntry]], requested: [String], truncated: Set<String>, paused: Set<String>,
        heldElsewhere: [String: Date], claimed: [String: Int64], sentAt: Duration, into out: inout [Output]
    ) {
        claimingReads.subtract(requested)
        // The leases the read took that the broker does not keep, let go together.
        var letGo: [TaskQueueLease] = []
        for queueName in requested {
            let lease = loaded(
                queueName, byQueue[queueName] ?? [], truncated: truncated.contains(queueName), paused: paused.contains(queueName),
                heldElsewhereUntil: heldElsewhere[queueName], claimedEpoch: claimed[queueName], sentAt: sentAt, into: &out
            )
            if let lease { letGo.append(lease) }
        }
        // A lease the read took for a queue not among `requested` (one the engine reads again whole)
        // is let go too.
        if !claimed.isEmpty {
            let asked = Set(requested)
            letGo += claimed.filter { !asked.contains($0.key) }.map { TaskQueueLease(queueName: $0.key, epoch: $0.value) }
        }
        if !letGo.isEmpty { out.append(.release(letGo.sorted { $0.queueName < $1.queueName })) }
    }

    /// free, kept → kept: a read took the queue's lease for `head`, its first action read (shared
    /// backends). The queue keeps the lease, and the head starts on it without a claim (as a head
    /// claimed with its predecessor's outcome does), if the broker runs, the read is young, the
    /// head is still the queue's head as read and may run now, and a slot is free for it (queues
    /// ready before it take theirs first): it starts in the same step, so its claim needs no
    /// timer. Otherwise the caller lets the lease go at once: a lease the broker holds and does not
    /// use keeps other workers of the pool from the queue. Returns whether the queue kept it.
    mutating func keepReadClaim(_ queueName: String, epoch: Int64, head: BrokerEntry?, sentAt: Duration) -> Bool {
        let dueBy = dueBy
        let hasSlot = running + ready.count < configuration.maxConcurrentQueues
        // As young as a claim's answer must be for its head to start (the head starts now, and is
        // renewed from then on with the running actions).
        let deadline = sentAt + configuration.claimLifetime
        let fresh = now < deadline
        return phase == .running && hasSlot && fresh && (inPlace(queueName) { state -> Bool in
            // A lease the broker kept has expired if the read could take it: the read's replaces it.
            guard let head, state.mayTakeSlot, state.load == nil, !state.pausedByOperator, state.held == nil,
                  state.head < state.waiting.count, state.notDueHead(dueBy: dueBy) == nil else { return false }
            let first = state.waiting[state.head]
            guard first.id == head.id, first.task.revision == head.task.revision, first.task.pause == nil else { return false }
            state.slot = .kept(
                epoch: epoch,
                next: Queue.NextClaim(id: head.id, revision: head.task.revision, timer: 0, deadline: deadline)
            )
            return true
        } ?? false)
    }
}
