// Where a queue stands with the broker's slots and, on a shared backend, with its lease: one value.
extension BrokerStateMachine.Queue {
    /// A queue's standing with the broker's slots (`maxConcurrentQueues`) and, on a shared
    /// backend, with its lease. Exactly one at a time:
    ///
    /// ```
    /// free, kept ─ take ─▶ inFlight                      (kept: its lease and next-head claim are spent)
    /// inFlight ─ stored ─▶ free, kept (the finish claimed the next head), leaseWait (let go)
    /// inFlight ─ claim granted ─▶ inFlight;  changed, not started ─▶ free
    /// inFlight ─ claim held elsewhere ─▶ leaseWait;  claim failed ─▶ claimRetry
    /// free ─ read while another worker holds the lease ─▶ leaseWait
    /// free, kept ─ the read took the lease for its head ─▶ kept (that lease; its next-head claim: that head)
    /// inFlight ─ parked for a rate limit's start ─▶ kept (shared backends), free
    /// claimRetry ─ retry timer ─▶ free
    /// leaseWait ─ its timer, a completion or a read ─▶ free
    /// kept ─ next-head claim too old, a read ─▶ kept (no next claim);  the broker stops ─▶ free
    /// ```
    ///
    /// Every other move is a bug of the machine: the transitions below refuse it and leave the
    /// queue as it was, and the machine counts it (``BrokerStateMachine/refusedTransitions``),
    /// which every test of the machine checks is zero.
    enum Slot {
        /// Holds no slot and waits for nothing: the head runs when the queue's turn comes.
        case free
        /// Holds no slot, and a finish kept the queue's lease for its next head (shared backends),
        /// under `epoch` (the one the finished action ran under): the broker lets such leases go
        /// when it stops, so that other workers need not wait for them to expire. `next`: the next
        /// head claimed with that finish, while it may start on the claim.
        case kept(epoch: Int64, next: NextClaim?)
        /// The head holds one of the broker's slots: claimed, running or having its outcome stored.
        case inFlight(Flight)
        /// A claim of the head failed: it is tried again once the storage backoff ends.
        case claimRetry
        /// Another worker holds the queue's lease, or this one let the queue go for another worker
        /// of the pool: claimed again when the timer fires, or at once when the queue changes.
        case leaseWait(timer: UInt64)
    }

    /// What happened to a queue while its head was in flight, decided on when the claim's answer or
    /// the outcome comes back.
    struct Flight {
        /// Another worker took the queue over: the outcome is refused, and what the broker knows of
        /// the queue is stale (it is read again).
        var leaseLost = false
        /// Storage found the head deleted or replaced when its outcome was stored: the outcome is
        /// discarded and the queue read again.
        var outdated = false
        /// The finish that stores the outcome also claimed the next head, and was sent at this
        /// elapsed time (``BrokerStateMachine/now``).
        var continuedAt: Duration?
        /// Storage may hold a newer state than the outcome will leave in memory (a restart heard
        /// while the action ran, a read that showed the outcome committed): read the queue again
        /// once the outcome is stored.
        var readAfterOutcome = false
        /// The queue goes with its outcome to another worker of the pool (`sharing`): once stored,
        /// it is not claimed here again for a while.
        var letGo = false
        /// The head started (it runs, or its outcome is being stored): renewals extend its lease
        /// (see ``BrokerStateMachine/renewableLeases``).
        var started = false
        /// The epoch of the queue's lease (shared backends; `0` on others): the one its claim was
        /// granted, or the kept lease's the head took its slot with. `nil` while the head is first
        /// claimed. The outcome, renewals and releases name the lease with it.
        var epoch: Int64?
    }

    /// Whether the queue holds no slot and waits for nothing.
    var isFree: Bool {
        if case .free = slot { true } else { false }
    }

    /// Whether the head holds one of the broker's slots.
    var inFlight: Bool {
        if case .inFlight = slot { true } else { false }
    }

    /// What happened while in flight, if the head is.
    var flight: Flight? {
        if case .inFlight(let flight) = slot { flight } else { nil }
    }

    /// The timer of the wait for another worker's lease, if the queue waits for one.
    var leaseWait: UInt64? {
        if case .leaseWait(let timer) = slot { timer } else { nil }
    }

    /// The next head claimed with its predecessor's outcome, while it may start on that claim.
    var nextClaim: NextClaim? {
        if case .kept(_, let claim) = slot { claim } else { nil }
    }

    /// Whether the broker may hold the queue's lease with nothing in flight (see ``Slot/kept(epoch:next:)``).
    var keptLease: Bool {
        if case .kept = slot { true } else { false }
    }

    /// Whether the head may take a slot: nothing in flight, no claim retry or lease to wait for.
    var mayTakeSlot: Bool {
        switch slot {
        case .free, .kept: true
        case .inFlight, .claimRetry, .leaseWait: false
        }
    }

    /// Whether the slot holds nothing that would be lost if the queue were forgotten (a kept lease
    /// expires on its own).
    var slotIsIdle: Bool {
        switch slot {
        case .free, .kept(_, nil): true
        case .kept(_, .some(_)), .inFlight, .claimRetry, .leaseWait: false
        }
    }

    /// The epoch of the lease the broker holds on the queue, if it holds one: a head in flight on
    /// a granted claim (or a kept lease), or a lease kept for the next head.
    var leaseEpoch: Int64? {
        switch slot {
        case .inFlight(let flight): flight.epoch
        case .kept(let epoch, _): epoch
        case .free, .claimRetry, .leaseWait: nil
        }
    }

    /// free or kept → inFlight: the head takes a slot; a kept lease and its next-head claim are spent
    /// (what becomes of the lease now follows the claim or the run: the flight starts under the
    /// kept lease's epoch, which a new claim replaces). Returns whether the queue could: not from
    /// inFlight, claimRetry or leaseWait.
    mutating func beginFlight() -> Bool {
        guard mayTakeSlot else { return false }
        var flight = Flight()
        if case .kept(let epoch, _) = slot { flight.epoch = epoch }
        slot = .inFlight(flight)
        return true
    }

    /// inFlight → `next` (free, kept, claimRetry or leaseWait); returns what happened in flight, or
    /// `nil` (the queue unchanged) if nothing was in flight or `next` is a flight.
    mutating func endFlight(to next: Slot = .free) -> Flight? {
        guard case .inFlight(let flight) = slot else { return nil }
        if case .inFlight = next { return nil }
        slot = next
        return flight
    }

    /// Notes what happened to the head in flight; nothing if the queue has nothing in flight.
    mutating func updateFlight(_ body: (inout Flight) -> Void) {
        guard case .inFlight(var flight) = slot else { return }
        body(&flight)
        slot = .inFlight(flight)
    }

    /// The finish of the action in flight, sent at `sentAt`, also claimed the next head.
    mutating func markContinued(sentAt: Duration) {
        updateFlight { $0.continuedAt = sentAt }
    }

    /// leaseWait → free, if the queue waits for a lease (under `timer`, when given); returns whether it did.
    @discardableResult
    mutating func endLeaseWait(timer token: UInt64? = nil) -> Bool {
        guard case .leaseWait(let timer) = slot, token == nil || token == timer else { return false }
        slot = .free
        return true
    }

    /// claimRetry → free, when the claim's retry timer fires.
    mutating func endClaimRetry() {
        guard case .claimRetry = slot else { return }
        slot = .free
    }

    /// kept(claim) → kept(nil): the next head is claimed again before it runs.
    mutating func forgetNextClaim() {
        guard case .kept(let epoch, .some(_)) = slot else { return }
        slot = .kept(epoch: epoch, next: nil)
    }

    /// Forgets the next head's claim if `token` is the timer that started with it.
    mutating func dropNextClaim(startedBy token: UInt64) {
        if case .kept(let epoch, let claim?) = slot, claim.timer == token { slot = .kept(epoch: epoch, next: nil) }
    }

    /// Sets the timer that ends the use of the next head's claim.
    mutating func setNextClaimTimer(_ token: UInt64) {
        guard case .kept(let epoch, var claim?) = slot else { return }
        claim.timer = token
        slot = .kept(epoch: epoch, next: claim)
    }

    /// kept → free: the broker lets the kept lease go. Returns the lease's epoch if the queue kept one.
    mutating func releaseKeptLease() -> Int64? {
        guard case .kept(let epoch, _) = slot else { return nil }
        slot = .free
        return epoch
    }
}

extension BrokerStateMachine {
    /// The broker stops: lets go of the leases its finishes kept for next heads that will not start
    /// (`keptLease`), so that other workers need not wait for them to expire. (No claim is under
    /// way for those queues: claiming a queue clears the mark, and a stopping broker claims nothing.)
    mutating func releaseKeptLeases(into out: inout [Output]) {
        var names: [String] = []
        for (queueName, state) in queues where state.keptLease {
            names.append(queueName)
        }
        guard !names.isEmpty else { return }
        names.sort()
        var leases: [TaskQueueLease] = []
        for queueName in names {
            if let epoch = inPlace(queueName, { $0.releaseKeptLease() }) ?? nil {
                leases.append(TaskQueueLease(queueName: queueName, epoch: epoch))
            } else {
                refusedTransitions += 1
            }
        }
        out.append(.release(leases))
    }
}
