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

    /// The queues whose leases a renewal extends: those whose action runs or has its outcome
    /// stored. Not one whose head is still being claimed (storage holds no lease of this worker's
    /// for it yet), nor one whose kept lease waits for its next head (a finish left eleven
    /// twelfths of it, and that head starts within a twelfth or is claimed again).
    var renewableQueues: [String] {
        queues.compactMap { $0.value.flight?.started == true ? $0.key : nil }.sorted()
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
        let names = renewableQueues
        guard !names.isEmpty, phase == .running || phase == .stopping else { return }
        renewal = .underWay
        out.append(.renew(names))
    }

    /// A renewal answered after `took`: leases another worker took over are lost (their outcomes
    /// will be refused), and the next renewal comes a third of the lease after this one began.
    mutating func renewed(lost: [String], took: Duration, into out: inout [Output]) {
        guard renewal == .underWay else { return }
        renewal = .idle
        for queueName in lost {
            leaseLost(queueName, into: &out)
        }
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
