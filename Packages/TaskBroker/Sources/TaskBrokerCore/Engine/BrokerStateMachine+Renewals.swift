// Lease renewals (shared backends): which leases, and when.
extension BrokerStateMachine {
    /// Where the renewal of the running actions' leases stands: one at a time.
    ///
    /// ```
    /// idle ─ a queue is in flight ─▶ scheduled ─ timer ─▶ underWay (the running queues' leases)
    ///                                         ├ timer, none of them started ─▶ idle
    ///                                         └ nothing in flight any more ─▶ idle (timer cancelled)
    /// underWay ─ renewed ─▶ scheduled (a third of the lease from its start), idle (nothing in flight)
    /// underWay ─ failed ─▶ scheduled (a twelfth of the lease)
    /// ```
    enum Renewal: Equatable {
        /// Nothing in flight, or the broker has no leases to renew (``Configuration/renewalInterval``).
        case idle
        /// The timer of the next renewal.
        case scheduled(UInt64)
        /// Storage renews the leases of these queues.
        case underWay
    }

    /// The leases a renewal extends, each under its epoch: those of queues whose action runs or
    /// has its outcome stored. Not one whose head is still being claimed (storage holds no lease
    /// of this worker's for it yet), nor one whose kept lease waits for its next head (a finish
    /// left eleven twelfths of it, and that head starts within a twelfth or is claimed again).
    var renewableLeases: [TaskQueueLease] {
        queues.compactMap { queueName, state in
            guard let flight = state.flight, flight.started, let epoch = flight.epoch else { return nil }
            return TaskQueueLease(queueName: queueName, epoch: epoch)
        }.sorted { $0.queueName < $1.queueName }
    }

    /// After each batch of inputs: schedules the next renewal once something is in flight
    /// (shared backends), a full interval on, and cancels a scheduled one once nothing is: an idle
    /// broker keeps no timer.
    mutating func scheduleRenewalIfDue(into out: inout [Output]) {
        if case .scheduled(let token) = renewal, running == 0 {
            cancelTimer(token, into: &out)
            renewal = .idle
        }
        guard renewal == .idle, running > 0, let interval = configuration.renewalInterval,
              phase == .running || phase == .stopping else { return }
        renewal = .scheduled(startTimer(.renewal, .realTime(interval), into: &out))
    }

    /// The renewal timer fired: renews the leases of the running queues, if any.
    mutating func renewalDue(into out: inout [Output]) {
        renewal = .idle
        let leases = renewableLeases
        guard !leases.isEmpty, phase == .running || phase == .stopping else { return }
        renewal = .underWay
        out.append(.renew(leases))
    }

    /// A renewal of the leases `sent` answered after `took`, and the next renewal comes a third of
    /// the lease after this one began. A lease another worker took over (`lost`) is lost if the
    /// broker still holds the queue under that epoch: the outcome in flight will be refused. A
    /// lease renewed that the broker no longer holds under its epoch (its outcome, stored
    /// meanwhile, released it, and the renewal extended it again) is released again: other workers
    /// would wait a whole lease for a queue this one let go.
    mutating func renewed(lost: [TaskQueueLease], sent: [TaskQueueLease], took: Duration, into out: inout [Output]) {
        guard renewal == .underWay else { return }
        renewal = .idle
        for lease in lost where queues[lease.queueName]?.leaseEpoch == lease.epoch {
            leaseLost(lease.queueName, into: &out)
        }
        let lostLeases = Set(lost)
        let letGo = sent.filter { !lostLeases.contains($0) && queues[$0.queueName]?.leaseEpoch != $0.epoch }
        if !letGo.isEmpty { out.append(.releaseAgain(letGo)) }
        guard running > 0, let interval = configuration.renewalInterval, phase == .running || phase == .stopping else { return }
        renewal = .scheduled(startTimer(.renewal, .realTime(max(.zero, interval - took)), into: &out))
    }

    /// A renewal failed: tried again after `Configuration.renewalRetry` (storage gives a renewal at
    /// most a quarter of the lease: a third, a quarter and a twelfth leave a third of it).
    mutating func renewFailed(into out: inout [Output]) {
        guard renewal == .underWay else { return }
        renewal = .idle
        guard running > 0, phase == .running || phase == .stopping else { return }
        renewal = .scheduled(startTimer(.renewal, .realTime(configuration.renewalRetry), into: &out))
    }
}
