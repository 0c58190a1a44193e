import Foundation

// Starting actions (the ready line, the cap, claims) and what becomes of them (outcomes stored or not).
extension BrokerStateMachine {
    // MARK: - Starting actions

    /// Takes the heads of ready queues, up to the cap, longest-waiting queue first; claims them
    /// (shared backends) or runs them.
    mutating func launch(into out: inout [Output]) {
        // After the heads have started or asked for starts (in `start`).
        defer { if !rate.isEmpty { askForStarts(into: &out) } }
        var picks: [BrokerEntry] = []
        // Heads claimed with their predecessors' outcomes: they start without a claim.
        var claimed: [BrokerEntry] = []
        while running < configuration.maxConcurrentQueues, let queueName = ready.popFirst() {
            guard var state = queues.removeValue(forKey: queueName) else { continue }
            if let pick = take(from: &state, queueName, into: &out) {
                // The next head's claim, used or not, is spent: a head that is not the one claimed
                // needs a claim of its own (the lease is this broker's, so it is granted unless
                // something changed). The kept lease is in use again: what happens to it now
                // follows the run or claim.
                let nextClaim = state.nextClaim
                guard state.beginFlight() else {
                    refusedTransitions += 1
                    queues[queueName] = state
                    continue
                }
                running += 1
                if let next = nextClaim, next.id == pick.id, next.revision == pick.task.revision, now < next.deadline {
                    claimed.append(pick)
                    readAheadIfLow(&state, queueName)
                } else {
                    picks.append(pick)
                    // A head to claim first reads ahead once its claim is granted: a refused claim
                    // (another worker holds the queue) would waste the read.
                    if !configuration.claimsHeads { readAheadIfLow(&state, queueName) }
                }
            }
            queues[queueName] = state
        }
        if !claimed.isEmpty { start(claimed, into: &out) }
        guard !picks.isEmpty else { return }
        if configuration.claimsHeads {
            out.append(.claim(picks.map(\.task)))
        } else {
            start(picks, into: &out)
        }
    }

    /// The head a queue runs after the action it is about to run (shared backends, while the broker
    /// runs): the finish of that action claims it too, so that it starts without a claim.
    mutating func nextHead(of queueName: String) -> StoredTask? {
        guard configuration.claimsHeads, phase == .running else { return nil }
        // Another worker of the pool has room, and more queues are ready here than this worker
        // runs: the finish lets this queue go (and announces it), so that either may claim it.
        if sharingBudget > 0, running >= configuration.maxConcurrentQueues, !ready.isEmpty {
            sharingBudget -= 1
            inPlace(queueName) { $0.updateFlight { $0.letGo = true } }
            return nil
        }
        let dueBy = dueBy
        return inPlace(queueName) { $0.claimableNext(dueBy: dueBy) } ?? nil
    }

    /// The queue's head if it may run now; moves the first waiting action to the sticky head.
    mutating func take(from state: inout Queue, _ queueName: String, into out: inout [Output]) -> BrokerEntry? {
        guard state.load == nil, state.mayTakeSlot, !state.pausedByOperator else { return nil }
        if state.held == nil, state.head < state.waiting.count {
            // Saved to run later: not yet (see `markReady`, which wakes the queue then).
            if let notBefore = state.notDueHead(dueBy: dueBy) {
                wake(at: notBefore)
                return nil
            }
            state.held = state.waiting[state.head]
            state.head += 1
            // Taken entries stay in `waiting` until more than half of it is taken: amortised O(1)
            // per take. Not 1,024 of them per queue as before, which held on to ~50,000 decoded
            // actions over 50 busy queues (the soak's worker).
            if state.head >= 64, state.head * 2 > state.waiting.count {
                state.waiting.removeFirst(state.head)
                state.head = 0
            }
        }
        guard let held = state.held else { return nil }
        if let pause = held.task.pause {
            if case .until(let date) = pause, state.timer == nil {
                state.timer = startTimer(.pause(queueName), .until(date), into: &out)
            }
            return nil
        }
        return held
    }

    /// Reports and runs heads that may run (claimed, or not needing a claim). A head under a rate
    /// limit runs only with a start granted; without one it waits (see `RateGate`), keeping its
    /// slot while the start is asked for. Checked here, right before the run, so that a start
    /// follows its grant by the same few steps whatever the head went through before (a claim).
    mutating func start(_ picks: [BrokerEntry], into out: inout [Output]) {
        var runs: [BrokerEntry] = []
        var next: [StoredTask?] = []
        var epochs: [Int64] = []
        var undecodable: [BrokerOutcome] = []
        runs.reserveCapacity(picks.count)
        for pick in picks {
            let task = pick.task
            if let gate = rate.bucket(for: task.queueName), rate.spend(gate.key) == nil {
                if !rate.wait(task.queueName, for: gate.key, limit: gate.limit) {
                    parkForStart(task.queueName, into: &out)
                }
                continue
            }
            out.append(.emit(.started(queueName: task.queueName, key: task.key, collection: task.collection, attempt: task.nextAttempt)))
            // The epoch of the lease it runs under, for its outcome.
            let epoch = inPlace(task.queueName) { state -> Int64 in
                state.updateFlight { $0.started = true }
                return state.leaseEpoch ?? 0
            } ?? 0
            if pick.action == nil {
                // It cannot run: pause its queue until restarted, durably.
                out.append(.emit(.undecodable(queueName: task.queueName, key: task.key, collection: task.collection)))
                undecodable.append(BrokerOutcome(
                    task: task, result: .waitForRestart, pause: .untilRestart, epoch: epoch,
                    reason: "the stored payload does not decode as the broker's action type"
                ))
            } else {
                runs.append(pick)
                epochs.append(epoch)
                next.append(nextHead(of: task.queueName))
            }
        }
        if !runs.isEmpty { out.append(.run(runs, next: next, epochs: epochs)) }
        if !undecodable.isEmpty { out.append(.store(undecodable)) }
    }

    mutating func claimed(_ heads: [StoredTask], results: [TaskClaimResult], sentAt: Duration = .zero, into out: inout [Output]) {
        recovered(.claim, heads.map(\.queueName), into: &out)
        var runs: [BrokerEntry] = []
        var notStarted: [String] = []
        var unused: [TaskQueueLease] = []
        for (index, head) in heads.enumerated() {
            let queueName = head.queueName
            guard var state = queues.removeValue(forKey: queueName) else { continue }
            defer { queues[queueName] = state }
            guard let flight = state.flight else { continue }
            let wentFirst = state.wentFirst
            state.wentFirst = false
            let result = index < results.count ? results[index] : .changed
            guard let held = state.held, held.id == BrokerActionID(head), held.task.revision == head.revision,
                  !flight.leaseLost, phase == .running else {
                // Deleted, replaced or released while the claim ran, or the broker is stopping: not started.
                // A lease granted to a running broker is claimed again with the queue's new head (or
                // expires if nothing is left to run); a stopping broker lets its leases go at once,
                // or other workers would wait a whole lease for the queues it claimed as it stopped.
                endFlight(&state)
                if flight.leaseLost {
                    // The lease was reported lost while the claim ran: the head never started, and
                    // what the broker knows of the queue may be stale. Read it again; its head is
                    // claimed anew after.
                    readAgain(&state, queueName)
                }
                notStarted.append(queueName)
                if let epoch = result.grantedEpoch, phase != .running {
                    unused.append(TaskQueueLease(queueName: queueName, epoch: epoch))
                }
                continue
            }
            switch result {
            case .granted(let epoch) where now - sentAt > configuration.claimLifetime:
                // Answered too long ago (the process stalled in between): read the queue again and
                // claim it anew rather than start on a lease that may have expired. The lease is
                // let go (under its epoch: one another worker took since is left alone), so that
                // the queue does not wait for it to expire.
                endFlight(&state)
                readAgain(&state, queueName)
                unused.append(TaskQueueLease(queueName: queueName, epoch: epoch))
            case .granted(let epoch):
                // The run, its outcome and its renewals name the lease by this epoch.
                state.updateFlight { $0.epoch = epoch }
                readAheadIfLow(&state, queueName)
                runs.append(held)
            case .changed:
                // The head is gone, changed or paused since it was read: read the queue again.
                endFlight(&state)
                state.claimFoundChange = !wentFirst
                readAgain(&state, queueName)
            case .heldElsewhere(let until):
                // Another worker runs the queue: wait for its lease to expire (it dies) or for the
                // queue to change, then read it again.
                endFlight(&state, to: .leaseWait(timer: startTimer(.leaseExpiry(queueName, first: true), .until(until), into: &out)))
                refusedSinceAsk = true
            }
        }
        for queueName in notStarted {
            markReady(queueName)
        }
        if !unused.isEmpty { out.append(.release(unused)) }
        start(runs, into: &out)
    }

    /// Reads a queue again (its state held out of `queues`): starts a read, or, when one is under
    /// way, has it read again once it answers (starting a second read instead lost the first
    /// one's "read again", and the first answer, older, was applied). A read waiting for its retry
    /// reads everything anew anyway.
    mutating func readAgain(_ state: inout Queue, _ queueName: String) {
        guard let load = state.load else {
            state.load = Queue.Load()
            loadsToIssue.append(queueName)
            return
        }
        if load.inProgress { state.load?.again = true }
    }

    /// Runs whose handlers were to start on claims grown too old (the process stalled between
    /// the decision and the start): they did not run. As with a claim answered too long ago, the
    /// queue is read again and its head claimed anew (the lease may be another worker's now);
    /// reported as a lease lost, which ends the run's `started`.
    mutating func notStarted(_ tasks: [StoredTask], into out: inout [Output]) {
        for task in tasks {
            guard var state = queues.removeValue(forKey: task.queueName) else { continue }
            if state.inFlight, state.holds(task) {
                // A lease reported lost meanwhile ends with the flight: no outcome will come.
                endFlight(&state)
                readAgain(&state, task.queueName)
                out.append(.emit(.leaseLost(queueName: task.queueName, key: task.key, collection: task.collection)))
            }
            queues[task.queueName] = state
        }
    }

    mutating func claimFailed(_ heads: [StoredTask], message: String, into out: inout [Output]) {
        let delay = backoff(after: .claim)
        var names: [String] = []
        for head in heads {
            guard var state = queues.removeValue(forKey: head.queueName) else { continue }
            if state.inFlight {
                endFlight(&state, to: .claimRetry)
                names.append(head.queueName)
            }
            queues[head.queueName] = state
        }
        guard !names.isEmpty else { return }
        failing[.claim, default: []].formUnion(names)
        _ = startTimer(.retryClaim(names), .after(delay), into: &out)
        out.append(.emit(.storageFailed(operation: .claim, queueNames: names, message: message, retryIn: delay)))
    }

    // MARK: - Outcomes

    mutating func stored(_ outcomes: [BrokerOutcome], into out: inout [Output]) {
        recovered(.store, outcomes.map(\.task.queueName), into: &out)
        // Queues whose next head was claimed with the outcome and may start on that claim.
        var continuing: [String] = []
        // Leases kept for next heads that will not run on them while the broker stops.
        var unused: [TaskQueueLease] = []
        for outcome in outcomes {
            let task = outcome.task
            let queueName = task.queueName
            guard var state = queues.removeValue(forKey: queueName) else { continue }
            guard state.inFlight else {
                queues[queueName] = state
                continue
            }
            let flight = endFlight(&state)
            let readAfterOutcome = flight.readAfterOutcome
            let continued = flight.continuedAt != nil
            let letGo = flight.letGo
            // A finish keeps the lease under the epoch the action ran under.
            let epoch = flight.epoch ?? 0
            if continued, phase != .running { unused.append(TaskQueueLease(queueName: queueName, epoch: epoch)) }
            // A read of the queue under way began before this outcome was committed: it may still
            // show the action as it was (run again after a success, or with its old attempts).
            // Its answer is dropped and the queue read again.
            if state.load?.inProgress == true { state.load?.again = true }
            if flight.leaseLost {
                // Another worker took the queue over while the action ran: the outcome was not
                // stored (the other worker runs the action). What this broker knew of the queue is
                // stale: read it again. A read already under way is kept (it reads again once it
                // answers: marked above), not doubled: a second read lost the first one's "read
                // again", and the first answer, older, was the one applied.
                for entry in state.waiting[state.head...] where locations[entry.id] == queueName {
                    locations[entry.id] = nil
                }
                if let held = state.held, locations[held.id] == queueName { locations[held.id] = nil }
                var fresh = Queue(load: state.load)
                fresh.loadedThrough = state.loadedThrough
                readAgain(&fresh, queueName)
                queues[queueName] = fresh
                out.append(.emit(.leaseLost(queueName: queueName, key: task.key, collection: task.collection)))
                continue
            }
            if flight.outdated {
                // Storage had a newer state of the queue than this broker: nothing was stored.
                if let held = state.held, held.id == BrokerActionID(task), held.task.revision == task.revision {
                    if locations[held.id] == queueName { locations[held.id] = nil }
                    state.held = nil
                }
                queues[queueName] = state
                out.append(.emit(.discarded(queueName: queueName, key: task.key, collection: task.collection)))
                reload(queueName, into: &out)
                continue
            }
            guard state.holds(task) else {
                // Deleted or replaced while it ran: the store changed nothing; the new version runs next.
                queues[queueName] = state
                out.append(.emit(.discarded(queueName: queueName, key: task.key, collection: task.collection)))
                markReady(queueName)
                continue
            }
            if outcome.deadLetter {
                // Failed for the last time: stored as a dead letter, which no read of the queue
                // returns. The queue goes on with its next action.
                state.held = nil
                locations[BrokerActionID(task)] = nil
                queues[queueName] = state
                out.append(.emit(.failed(queueName: queueName, key: task.key, collection: task.collection, result: outcome.result)))
                out.append(.emit(.deadLettered(
                    queueName: queueName, key: task.key, collection: task.collection, reason: outcome.reason ?? ""
                )))
                if readAfterOutcome { reload(queueName, into: &out) }
                markReady(queueName)
                continue
            }
            switch outcome.result {
            case .success:
                state.held = nil
                locations[BrokerActionID(task)] = nil
                if letGo, !continued, phase == .running {
                    // Let go for another worker of the pool, which hears the completion: not claimed
                    // here again for a twelfth of the lease unless the queue changes. Without it this
                    // worker, whose line soon reached the queue again, took it back before the asker
                    // could (300,000 actions, 2 processes: 9,600 and 290,400).
                    state.slot = .leaseWait(timer: startTimer(.leaseExpiry(queueName, first: false), .after(configuration.nextHeadLifetime), into: &out))
                }
                // The finish claimed the next head: it starts without a claim if it is still the head
                // when its turn in the ready line comes (changes may arrive meanwhile).
                if let continuedAt = flight.continuedAt, phase == .running {
                    var nextClaim: Queue.NextClaim?
                    if let next = outcome.next, state.load == nil, state.head < state.waiting.count,
                       state.waiting[state.head].task.isVersion(of: next) {
                        nextClaim = Queue.NextClaim(
                            id: BrokerActionID(next), revision: next.revision, timer: 0,
                            deadline: continuedAt + configuration.nextHeadLifetime
                        )
                        continuing.append(queueName)
                    }
                    state.slot = .kept(epoch: epoch, next: nextClaim)
                }
                queues[queueName] = state
                out.append(.emit(.succeeded(queueName: queueName, key: task.key, collection: task.collection)))
            case .retry, .waitForRestart, .deadLetter:
                if let held = state.held { state.held?.task.attempts = held.task.nextAttempt }
                state.held?.task.pause = outcome.pause
                state.held?.task.lastFailure = outcome.failure
                if case .until(let date)? = outcome.pause {
                    state.timer = startTimer(.pause(queueName), .until(date), into: &out)
                }
                queues[queueName] = state
                out.append(.emit(.failed(queueName: queueName, key: task.key, collection: task.collection, result: outcome.result)))
                // Storage may hold a newer state than this outcome (a restart committed after it).
                if readAfterOutcome { reload(queueName, into: &out) }
            }
            markReady(queueName)
        }
        if !continuing.isEmpty {
            // One timer for the batch: the claims it made are spent once it fires.
            let token = startTimer(.nextHeadExpiry(continuing), .after(configuration.nextHeadLifetime), into: &out)
            for queueName in continuing {
                // In place: `queues[queueName]?.nextClaim?.timer = token` copied the whole queue
                // (~2 % of the engine's CPU per action in a burn-down; see `inPlace`).
                inPlace(queueName) { $0.setNextClaimTimer(token) }
            }
        }
        if !unused.isEmpty { out.append(.release(unused)) }
    }

    mutating func storeFailed(_ outcomes: [BrokerOutcome], message: String, into out: inout [Output]) {
        let names = outcomes.map(\.task.queueName)
        guard phase != .abandoning else {
            out.append(.emit(.storageFailed(operation: .store, queueNames: names, message: message, retryIn: .zero)))
            return
        }
        // The queues stay in flight: nothing else of theirs runs until the outcome is stored.
        let delay = backoff(after: .store)
        failing[.store, default: []].formUnion(names)
        _ = startTimer(.retryStore(outcomes), .after(delay), into: &out)
        out.append(.emit(.storageFailed(operation: .store, queueNames: names, message: message, retryIn: delay)))
    }
}
