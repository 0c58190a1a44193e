import Foundation
import QueueRetry

// Rate limits: asking storage for starts, and what the heads that wait for one do (see `RateGate`).
extension BrokerStateMachine {
    /// Sends the requests for starts that heads are waiting for, and gives back starts granted
    /// and not used (their queues changed meanwhile).
    mutating func askForStarts(into out: inout [Output]) {
        for (key, limit, count) in rate.requests() {
            out.append(.acquireStarts(key, limit: limit, count: count))
        }
        for (key, at, count) in rate.takeUnusedGrants() {
            out.append(.releaseStarts(key, at: at, count: count))
        }
    }

    /// Storage answered a request for starts: the queues granted one go first in the ready line
    /// (this step's launch spends their starts); the others park until the bucket has room.
    mutating func startsGranted(_ key: String, granted: Int, retryAfter: Duration?, at: Date, into out: inout [Output]) {
        let (starting, parked) = rate.answered(key, granted: granted, at: at)
        recovered(.claim, starting + parked, into: &out)
        for queueName in parked {
            parkForStart(queueName, into: &out)
        }
        // Each starts now on its granted start (a queue that changed meanwhile leaves its start
        // unused: given back at the end of the launch).
        var picks: [BrokerEntry] = []
        for queueName in starting {
            if phase == .running, let held = queues[queueName]?.held, queues[queueName]?.inFlight == true {
                picks.append(held)
            } else {
                parkForStart(queueName, into: &out)
            }
        }
        if !picks.isEmpty { start(picks, into: &out) }
        if rate.needsTimer(key), let limit = rate.buckets[key]?.limit {
            // The oldest start leaves the window then; asked a little after (see `TaskRateLimit.margin`).
            let delay = max(retryAfter ?? .milliseconds(1), .milliseconds(1)) + limit.margin
            rate.setTimer(key, startTimer(.rateLimit(key), .after(delay), into: &out))
        }
    }

    /// A head in flight that has no start and will not get one soon: it gives its slot back and
    /// waits for its bucket's timer (`RateGate`), out of the ready line. On a shared backend the
    /// queue's lease stays with this worker until it is claimed again (or expires).
    mutating func parkForStart(_ queueName: String, into out: inout [Output]) {
        guard var state = queues.removeValue(forKey: queueName) else { return }
        if state.inFlight {
            // The lease stays under the epoch the head was granted.
            let epoch = state.leaseEpoch
            endFlight(&state, to: configuration.claimsHeads ? .kept(epoch: epoch ?? 0, next: nil) : .free)
        }
        queues[queueName] = state
    }

    /// Asking for starts failed: the queues that asked park, and the request is tried again after
    /// the storage backoff.
    mutating func startsFailed(_ key: String, message: String, into out: inout [Output]) {
        let (released, failures) = rate.failed(key)
        guard !released.isEmpty else { return }
        for queueName in released {
            parkForStart(queueName, into: &out)
        }
        let delay = configuration.storageBackoff.delay(afterFailures: failures)
        if rate.needsTimer(key) {
            rate.setTimer(key, startTimer(.rateLimit(key), .after(delay), into: &out))
        }
        failing[.claim, default: []].formUnion(released)
        out.append(.emit(.storageFailed(operation: .claim, queueNames: released, message: message, retryIn: delay)))
    }
}
