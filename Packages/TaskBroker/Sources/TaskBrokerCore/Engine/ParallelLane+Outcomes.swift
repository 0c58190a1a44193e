import Foundation
import QueueRetry

// What the lane does with an outcome: kept back with its held batch until the batch is complete
// or due, or queued for the next store; what a store or a settlement ended with; a failed store.
extension ParallelLane {
    /// A claim the lane took: whether its handler runs, and the held batch it came in, if any.
    struct Running {
        var claim: TaskParallelClaim
        var handlerRuns: Bool
        var batch: UInt64?
    }

    /// A batch of claims the backend holds under a transaction: its handle, how many of its
    /// handlers run, and the outcomes kept back until the batch is complete or due.
    struct HeldBatch {
        let claims: any TaskParallelHeldClaims
        var running: Int
        var outcomes: [TaskParallelOutcome] = []
    }

    /// A handler's outcome (once per claim): kept with its held batch, which is settled once none
    /// of its handlers runs, or else queued for the next store.
    func ran(_ outcome: TaskParallelOutcome, state: inout State) {
        let id = ClaimID(outcome.claim)
        guard let entry = state.running[id], entry.handlerRuns else { return }
        state.running[id]?.handlerRuns = false
        guard let number = entry.batch, state.held[number] != nil else {
            if let number = entry.batch, state.settles[number] != nil {
                // Its batch is about to be settled: this outcome goes with it.
                state.settles[number]?.outcomes.append(outcome)
            } else if let number = entry.batch, state.settling[number] != nil {
                // Its batch is being settled: stored once that made this claim an ordinary one.
                state.settling[number]?.append(outcome)
            } else {
                state.outcomes.append(outcome)
            }
            return
        }
        // In place (a copy taken out of the dictionary would copy the outcomes on every append).
        state.held[number]?.outcomes.append(outcome)
        state.held[number]?.running -= 1
        if state.held[number]?.running == 0 {
            state.settles[number] = state.held.removeValue(forKey: number)
        }
    }

    /// Outcomes whose store failed wait for the backoff, then go with the next store.
    func storeFailed(_ outcomes: [TaskParallelOutcome], _ message: String, state: inout State, group: inout DiscardingTaskGroup) {
        state.storeFailures += 1
        state.outcomes = outcomes + state.outcomes
        state.storeWaiting = true
        let delay = backoff.delay(afterFailures: state.storeFailures)
        emit(.storageFailed(operation: .store, queueNames: Array(Set(outcomes.map(\.claim.task.queueName))).sorted(), message: message, retryIn: delay))
        let mailbox = self.mailbox
        let sleep = time.sleep
        group.addTask {
            try? await sleep(delay)
            mailbox.post(.retryStore)
        }
    }

    /// Outcomes a store or a settlement ended with: each claim leaves the lane, with its event
    /// (`leaseLost` for a refused one).
    func stored(_ outcomes: [TaskParallelOutcome], refused: [TaskParallelClaim], state: inout State) {
        let refusedIDs = Set(refused.map(ClaimID.init))
        for outcome in outcomes {
            let id = ClaimID(outcome.claim)
            state.running[id] = nil
            let task = outcome.claim.task
            if refusedIDs.contains(id) {
                emit(.leaseLost(queueName: task.queueName, key: task.key, collection: task.collection))
                continue
            }
            switch outcome.result {
            case .completed:
                emit(.succeeded(queueName: task.queueName, key: task.key, collection: task.collection))
            case .deadLettered:
                emit(.deadLettered(
                    queueName: task.queueName, key: task.key, collection: task.collection,
                    reason: task.lastFailure?.reason ?? "failed"
                ))
            case .failed(let retryAt):
                let after = retryAt.map { max(.zero, Duration(timeInterval: $0.timeIntervalSince(time.now()))) } ?? .zero
                emit(.failed(queueName: task.queueName, key: task.key, collection: task.collection, result: .retry(after: after)))
            case .held:
                emit(.failed(queueName: task.queueName, key: task.key, collection: task.collection, result: .waitForRestart))
            }
        }
        // A failure to run again soon is in the database: look for it.
        if outcomes.contains(where: { if case .failed = $0.result { true } else { false } }) {
            if state.claiming { state.wokenDuringClaim = true } else { state.wanted = true }
        }
    }
}

extension TaskParallelClaim.ID {
    init(_ claim: TaskParallelClaim) {
        self = claim.id
    }
}
