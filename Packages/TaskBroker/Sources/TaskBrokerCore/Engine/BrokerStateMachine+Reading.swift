import Foundation

// Reading queues (and reading them again) and applying committed changes, buffered while a queue is read.
extension BrokerStateMachine {
    // MARK: - Reading queues

    /// Applies a queue's read. With `claimedEpoch`, the read took the queue's lease for its first
    /// action (shared backends): the queue keeps that lease for its head (see
    /// ``keepReadClaim(_:epoch:head:sentAt:)``), or returns it for the caller to let go.
    mutating func loaded(
        _ queueName: String, _ entries: [BrokerEntry], truncated: Bool = false, paused: Bool = false, heldElsewhereUntil: Date? = nil,
        claimedEpoch: Int64? = nil, sentAt: Duration = .zero, into out: inout [Output]
    ) -> TaskQueueLease? {
        let claimedLease = claimedEpoch.map { TaskQueueLease(queueName: queueName, epoch: $0) }
        guard var state = queues.removeValue(forKey: queueName) else {
            return claimedLease
        }
        guard let load = state.load else {
            queues[queueName] = state
            return claimedLease
        }
        if load.again {
            // Read again; the changes heard so far are still applied after that read (a restart
            // among them is still reported).
            state.load = Queue.Load(buffered: load.buffered)
            queues[queueName] = state
            loadsToIssue.append(queueName)
            return claimedLease
        }
        state.load = nil
        firstReads.remove(queueName)
        if paused != state.pausedByOperator {
            out.append(.emit(paused ? .paused(queueName: queueName) : .resumed(queueName: queueName)))
        }
        state.pausedByOperator = paused
        state.truncated = truncated
        state.readThrough = truncated ? entries.lazy.map(\.task.position).max() ?? .min : .min
        state.append = nil  // a read ahead under way is superseded: its answer is ignored
        // Forget what the queue held before, except an action in flight.
        for entry in state.waiting[state.head...] where locations[entry.id] == queueName {
            locations[entry.id] = nil
        }
        // A head whose timed retry has fired here (its stored pause stays until its next outcome):
        // read again, it is not paused again, nor its resumption reported twice.
        var firedRetry: StoredTask?
        if let held = state.held, !state.inFlight {
            if locations[held.id] == queueName { locations[held.id] = nil }
            if held.task.pause == nil, state.timer == nil { firedRetry = held.task }
            state.held = nil
        }
        if let timer = state.timer {
            cancelTimer(timer, into: &out)
            state.timer = nil
        }
        state.waiting = []
        state.head = 0
        var list = entries
        for index in entries.indices {
            state.loadedThrough = max(state.loadedThrough, entries[index].task.revision)
        }
        if state.inFlight, let held = state.held, let index = list.firstIndex(where: { $0.id == held.id }) {
            if list[index].task.revision == held.task.revision {
                // Its outcome is already committed (attempts or pause changed), and what followed it
                // may be too: the outcome, once reported, would overwrite that. Read again after it.
                if list[index].task.attempts != held.task.attempts || list[index].task.pause != held.task.pause {
                    state.updateFlight { $0.readAfterOutcome = true }
                }
                list.remove(at: index)  // the version in flight
            } else {
                state.held = nil  // replaced behind the broker's back: the run in flight is stale
            }
        }
        var movedAway: [Int] = []
        for index in list.indices {
            let id = list[index].id
            if let other = locations[id], other != queueName {
                if let known = knownRevision(of: id), known > list[index].task.revision {
                    // Saved into `other` after this read's snapshot (moved there): the version read
                    // here is stale. Taken back, it ran, and the moved one stayed stored, unrun.
                    movedAway.append(index)
                    continue
                }
                removeEntry(id, revision: nil, into: &out)
            }
            locations[id] = queueName
        }
        for index in movedAway.reversed() {
            list.remove(at: index)
        }
        if !state.inFlight, state.held == nil, let first = list.first, first.task.pause != nil {
            state.held = first
            list.removeFirst()
            if case .until(let date)? = first.task.pause {
                if let firedRetry, first.task.isVersion(of: firedRetry), first.task.attempts == firedRetry.attempts {
                    state.held?.task.pause = nil
                } else {
                    state.timer = startTimer(.pause(queueName), .until(date), into: &out)
                }
            }
        }
        state.waiting = list
        // Not the read-ahead of a queue another worker holds: its first run here reads ahead.
        if heldElsewhereUntil == nil { readAheadIfLow(&state, queueName) }
        queues[queueName] = state
        for change in load.buffered {
            if case .saved(let entry) = change, entry.task.revision <= state.loadedThrough { continue }
            apply(change, into: &out)
        }
        let first = queues[queueName]?.claimFoundChange ?? false
        inPlace(queueName) {
            $0.claimFoundChange = false
            $0.wentFirst = first
        }
        // The read took the lease for the head: kept for it, or let go.
        if let claimedEpoch {
            let kept = keepReadClaim(queueName, epoch: claimedEpoch, head: entries.first, sentAt: sentAt)
            markReady(queueName, first: first)
            return kept ? nil : claimedLease
        }
        // Read while another worker held its lease: it waits for that lease as a refused claim
        // does, without the claim. Unless an action of it was completed or deleted while it was
        // read (the holder may have let it go since): then it is claimed as any other.
        if let until = heldElsewhereUntil, phase == .running, queues[queueName]?.isFree == true,
           !load.buffered.contains(where: { if case .deleted = $0 { true } else { false } }) {
            let timer = startTimer(.leaseExpiry(queueName, first: true), .until(until), into: &out)
            inPlace(queueName) { $0.slot = .leaseWait(timer: timer) }
            refusedSinceAsk = true
            return nil
        }
        markReady(queueName, first: first)
        return nil
    }

    mutating func loadFailed(_ queueNames: [String], message: String, into out: inout [Output]) {
        let delay = backoff(after: .load)
        var names: [String] = []
        for queueName in queueNames {
            guard queues[queueName]?.load != nil else { continue }
            // The retry reads everything anew: nothing buffered is lost, nothing needs a second read.
            queues[queueName]?.load?.inProgress = false
            queues[queueName]?.load?.again = false
            names.append(queueName)
        }
        guard !names.isEmpty else { return }
        failing[.load, default: []].formUnion(names)
        _ = startTimer(.retryLoad(names), .after(delay), into: &out)
        out.append(.emit(.storageFailed(operation: .load, queueNames: names, message: message, retryIn: delay)))
    }

    /// Reads a queue (again): a new queue is created loading; a loaded one stops taking actions
    /// until the read ends; one being read is read once more after.
    mutating func reload(_ queueName: String, into out: inout [Output]) {
        guard var state = queues.removeValue(forKey: queueName) else {
            guard !ignored.contains(queueName) else { return }
            switch accepts(queueName) {
            case .runs:
                break
            case .refused:
                ignored.insert(queueName)
                return
            case .ownedElsewhere:
                return
            }
            learned(queueName)
            return
        }
        if let leaseWait = state.leaseWait {
            // The queue changed: another worker may have let it go. Read it and claim again.
            cancelTimer(leaseWait, into: &out)
            state.endLeaseWait()
        }
        // Read again, the queue's head is claimed again before it runs.
        state.forgetNextClaim()
        readAgain(&state, queueName)
        queues[queueName] = state
    }

    // MARK: - Changes

    mutating func apply(_ change: BrokerChange, into out: inout [Output]) {
        switch change {
        case .saved(let entry):
            saved(entry, into: &out)
        case .completed(let task):
            // Only the holder of the queue's lease completes an action: when this broker runs that
            // very version, the completion is its own (its outcome is on its way), not a deletion.
            if let state = queues[task.queueName], state.inFlight, let held = state.held,
               held.id == BrokerActionID(task), held.task.revision == task.revision {
                return
            }
            // A completion is announced only when its worker lets the queue go (one that keeps it
            // for the next head announces nothing): a wait for that worker's lease ends here, and
            // the queue's next head is claimed, instead of waiting for the lease to expire.
            if let leaseWait = queues[task.queueName]?.leaseWait {
                cancelTimer(leaseWait, into: &out)
                inPlace(task.queueName) { $0.endLeaseWait() }
                markReady(task.queueName)
            }
            apply(.deleted(task), into: &out)
        case .deleted(let task):
            if queues[task.queueName]?.load != nil {
                queues[task.queueName]?.load?.buffered.append(change)
                return
            }
            inPlace(task.queueName) { state in
                if state.append != nil { state.append?.deleted.insert(BrokerActionID(task)) }
            }
            let id = BrokerActionID(task)
            let queueName = locations[id]
            removeEntry(id, revision: task.revision, into: &out)
            if let queueName { markReady(queueName) }
        case .resumed(let queueNames):
            for queueName in queueNames {
                guard let state = queues[queueName] else { continue }
                // Heard while an action runs: the restart may have been committed after that
                // action's outcome (which pauses the queue in memory once reported stored).
                if state.inFlight { inPlace(queueName) { $0.updateFlight { $0.readAfterOutcome = true } } }
                if state.load != nil {
                    if state.held?.task.pause != nil { queues[queueName]?.pausedWhenRestarted = true }
                    queues[queueName]?.load?.buffered.append(.resumed([queueName]))
                } else {
                    clearPause(queueName, into: &out)
                }
            }
        case .purged(let queueName):
            guard var state = queues.removeValue(forKey: queueName) else { return }
            if state.load != nil {
                // What the read returns may predate the purge: read again.
                if state.load?.inProgress == true { state.load?.again = true }
                state.load?.buffered = []
                queues[queueName] = state
                return
            }
            for entry in state.waiting[state.head...] where locations[entry.id] == queueName {
                locations[entry.id] = nil
            }
            state.waiting = []
            state.head = 0
            state.truncated = false
            state.append = nil
            state.forgetNextClaim()
            if let held = state.held {
                if locations[held.id] == queueName { locations[held.id] = nil }
                state.held = nil  // if it is in flight, its outcome is discarded
            }
            if let timer = state.timer {
                cancelTimer(timer, into: &out)
                state.timer = nil
            }
            queues[queueName] = state
        case .reload(let queueNames):
            for queueName in queueNames {
                reload(queueName, into: &out)
            }
        case .reloadEverything(let storedQueues):
            for queueName in Set(queues.keys).union(storedQueues).sorted() {
                reload(queueName, into: &out)
            }
        case .spareCapacityElsewhere(let room):
            guard configuration.claimsHeads else { return }
            sharingBudget = max(sharingBudget, room)
            if let sharing { cancelTimer(sharing, into: &out) }
            sharing = startTimer(.sharingEnds, .after(configuration.sharingLifetime), into: &out)
        case .unowned(let queueNames):
            // Their owner stopped: asked for now, not at their next change, since their stored
            // actions announce none (`accepts` takes a queue if this broker's filter accepts it and
            // no other broker took it first).
            guard phase == .running else { return }  // a stopping broker takes no queue
            for queueName in queueNames where queues[queueName] == nil {
                ignored.remove(queueName)
                reload(queueName, into: &out)
            }
        }
    }

    mutating func saved(_ entry: BrokerEntry, into out: inout [Output]) {
        let queueName = entry.task.queueName
        let id = entry.id
        if let known = knownRevision(of: id), known >= entry.task.revision {
            return  // a newer version is already known (notifications can arrive out of commit order)
        }
        guard let state = queues[queueName] else {
            // Moved out of one of this broker's queues, or a queue this broker has not seen yet.
            let previous = locations[id]
            removeEntry(id, revision: nil, into: &out)
            if let previous { markReady(previous) }
            reload(queueName, into: &out)
            queues[queueName]?.load?.buffered.append(.saved(entry))
            return
        }
        if state.load != nil {
            if let other = locations[id], other != queueName {
                removeEntry(id, revision: nil, into: &out)
                markReady(other)
            }
            queues[queueName]?.load?.buffered.append(.saved(entry))
            return
        }
        if entry.task.revision <= state.loadedThrough {
            return  // the read of this queue already saw this save, or what replaced it
        }
        let previous = locations[id]
        // The paused head saved again: its pause ends with the old version (`.resumed`, as documented).
        let resumesPause = state.held.map { $0.id == id && $0.task.pause != nil } ?? false
        removeEntry(id, revision: nil, into: &out)
        if let previous, previous != queueName { markReady(previous) }
        if resumesPause { out.append(.emit(.resumed(queueName: queueName))) }
        guard var current = queues.removeValue(forKey: queueName) else { return }
        if current.truncated, entry.task.position > current.readThrough {
            // After what was read: the next read finds the action in storage, or, if one is under
            // way and its answer reaches the action, the action is added after it.
            current.append?.saved.append(entry)
            queues[queueName] = current
            markReady(queueName)
            return
        }
        // Binary search for the first waiting action the new one runs before; equal ones stay in front.
        var low = current.head
        var high = current.waiting.count
        while low < high {
            let middle = (low + high) / 2
            if entry.runs(before: current.waiting[middle]) { high = middle } else { low = middle + 1 }
        }
        current.waiting.insert(entry, at: low)
        queues[queueName] = current
        locations[id] = queueName
        markReady(queueName)
    }

    /// The revision of the version of an action the broker holds (waiting or held).
    func knownRevision(of id: BrokerActionID) -> Int64? {
        guard let queueName = locations[id], let state = queues[queueName] else { return nil }
        if let held = state.held, held.id == id { return held.task.revision }
        return state.waiting[state.head...].first { $0.id == id }?.task.revision
    }

    /// Removes the known version of an action (any version when `revision` is `nil`) from
    /// whichever queue holds it. A removed action in flight keeps running; its outcome is discarded.
    mutating func removeEntry(_ id: BrokerActionID, revision: Int64?, into out: inout [Output]) {
        guard let queueName = locations[id], var state = queues.removeValue(forKey: queueName) else { return }
        defer { queues[queueName] = state }
        if let held = state.held, held.id == id, revision == nil || held.task.revision == revision {
            locations[id] = nil
            state.held = nil
            if let timer = state.timer {
                cancelTimer(timer, into: &out)
                state.timer = nil
            }
            return
        }
        if let index = state.waiting[state.head...].firstIndex(where: { $0.id == id && (revision == nil || $0.task.revision == revision) }) {
            locations[id] = nil
            state.waiting.remove(at: index)
            readAheadIfLow(&state, queueName)
            if state.needsRefill, phase == .running { readAgain(&state, queueName) }
        }
    }

    mutating func clearPause(_ queueName: String, into out: inout [Output]) {
        guard var state = queues.removeValue(forKey: queueName) else { return }
        if let timer = state.timer {
            cancelTimer(timer, into: &out)
            state.timer = nil
        }
        let wasPaused = state.held?.task.pause != nil || state.pausedWhenRestarted
        state.pausedWhenRestarted = false
        state.held?.task.pause = nil
        queues[queueName] = state
        if wasPaused { out.append(.emit(.resumed(queueName: queueName))) }
        markReady(queueName)
    }

    mutating func leaseLost(_ queueName: String, into out: inout [Output]) {
        guard var state = queues.removeValue(forKey: queueName) else { return }
        guard state.inFlight else {
            queues[queueName] = state
            reload(queueName, into: &out)
            return
        }
        // The outcome in flight was refused; `stored` reads the queue again when it arrives.
        state.updateFlight { $0.leaseLost = true }
        queues[queueName] = state
    }
}
