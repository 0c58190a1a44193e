import Foundation
import QueueRetry

// Timers (timed retries, storage retries) and the helpers every rule shares: the ready line and the backoff.
extension BrokerStateMachine {
    // MARK: - Timers

    mutating func startTimer(_ purpose: TimerPurpose, _ delay: TimerDelay, into out: inout [Output]) -> UInt64 {
        nextToken += 1
        timers[nextToken] = purpose
        if case .pause = purpose { pauseTimers += 1 }
        out.append(.startTimer(nextToken, delay))
        return nextToken
    }

    mutating func cancelTimer(_ token: UInt64, into out: inout [Output]) {
        if forgetTimer(token) != nil {
            out.append(.cancelTimer(token))
        }
    }

    private mutating func forgetTimer(_ token: UInt64) -> TimerPurpose? {
        let purpose = timers.removeValue(forKey: token)
        if case .pause? = purpose { pauseTimers -= 1 }
        return purpose
    }

    mutating func timerFired(_ token: UInt64, into out: inout [Output]) {
        guard let purpose = forgetTimer(token) else { return }
        switch purpose {
        case .pause(let queueName):
            guard var state = queues.removeValue(forKey: queueName) else { return }
            guard state.timer == token else {
                queues[queueName] = state
                return
            }
            state.timer = nil
            state.held?.task.pause = nil
            queues[queueName] = state
            out.append(.emit(.resumed(queueName: queueName)))
            markReady(queueName)
        case .rateLimit(let key):
            for queueName in rate.timerFired(key, token: token) {
                markReady(queueName)
            }
        case .retryLoad(let queueNames):
            for queueName in queueNames where queues[queueName]?.load?.inProgress == false {
                queues[queueName]?.load?.inProgress = true
                loadsToIssue.append(queueName)
            }
        case .retryClaim(let queueNames):
            for queueName in queueNames {
                inPlace(queueName) { $0.endClaimRetry() }
                markReady(queueName)
            }
        case .retryStore(let outcomes):
            out.append(.store(outcomes))
        case .retryList:
            listing = false
        case .wake:
            woke(token, into: &out)
        case .retrySchedule:
            schedule.finding = false
            findScheduled(into: &out)
        case .renewal:
            renewalDue(into: &out)
        case .leaseExpiry(let queueName, let first):
            // The lease may have expired (its holder died): claim the head again, first in the line.
            // Its action has waited since the dead holder claimed it, longer than any queue in the
            // line; at the back, a worker at its cap would add a whole turn of the line to the
            // takeover. Not read again first: changes reached the queue while it waited, and the
            // claim checks the head against storage (a changed head reads the queue). A read here,
            // behind the line's claims and completions, added up to 0.7 s to a takeover in the
            // crash test. A queue this worker let go for another worker of the pool (`first:
            // false`) goes to the back instead.
            guard inPlace(queueName, { $0.endLeaseWait(timer: token) }) == true else { return }
            markReady(queueName, first: first)
        case .sharingEnds:
            if sharing == token {
                sharing = nil
                sharingBudget = 0
            }
        case .askPauseEnds:
            if askPause == token { askPause = nil }
        case .nextHeadExpiry(let queueNames):
            // Unrenewed for too long: those heads are claimed again when their turn comes.
            for queueName in queueNames {
                inPlace(queueName) { $0.dropNextClaim(startedBy: token) }
            }
        }
    }

    // MARK: - Helpers

    /// Ends a queue's flight (inFlight → `next`) and frees its slot; returns what happened in flight.
    /// A queue with nothing in flight is left as it is (a refused transition).
    @discardableResult
    mutating func endFlight(_ state: inout Queue, to next: Queue.Slot = .free) -> Queue.Flight {
        guard let flight = state.endFlight(to: next) else {
            refusedTransitions += 1
            return Queue.Flight()
        }
        running -= 1
        return flight
    }

    /// Puts a queue at the back of the ready line (at its front when `first`) if its head may
    /// run; a head saved to run later wakes the broker when its time comes.
    mutating func markReady(_ queueName: String, first: Bool = false) {
        // A queue waiting for a start of its rate limit goes back to the line when it gets one.
        guard !ready.contains(queueName), rate.isEmpty || !rate.waiting.contains(queueName) else { return }
        let reads = phase == .running
        let dueBy = dueBy
        let (runnable, refills, priority, later) = inPlace(queueName) { state -> (Bool, Bool, Int, Date?) in
            // What was read ahead has run and storage holds more: read on.
            guard reads, state.needsRefill else {
                let runnable = state.isRunnable()
                let later = runnable ? state.notDueHead(dueBy: dueBy) : nil
                return (runnable && later == nil, false, runnable ? state.headPriority : 0, later)
            }
            state.load = Queue.Load()
            return (false, true, 0, nil)
        } ?? (false, false, 0, nil)
        if refills { loadsToIssue.append(queueName) }
        if let later { wake(at: later) }
        guard runnable else { return }
        ready.insert(queueName, priority: priority, first: first)
    }

    mutating func backoff(after operation: TaskStorageOperation) -> Duration {
        let count = failures[operation, default: 0] + 1
        failures[operation] = count
        return configuration.storageBackoff.delay(afterFailures: count)
    }

    /// An operation succeeded for these queues: reset its backoff, and report the queues it held up.
    mutating func recovered(_ operation: TaskStorageOperation, _ queueNames: @autoclosure () -> [String], into out: inout [Output]) {
        guard failures[operation] != nil || failing[operation] != nil else { return }
        failures[operation] = nil
        let queueNames = queueNames()
        guard var held = failing[operation] else { return }
        let names = queueNames.filter { held.remove($0) != nil }
        failing[operation] = held.isEmpty ? nil : held
        if !names.isEmpty {
            out.append(.emit(.storageRecovered(operation: operation, queueNames: names)))
        }
    }
}
