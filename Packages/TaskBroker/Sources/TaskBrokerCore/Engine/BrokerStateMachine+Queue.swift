import Foundation

// The state the machine keeps per queue.
extension BrokerStateMachine {
    /// One queue the broker owns.
    struct Queue {
        /// Actions waiting, in run order, from `head` on.
        var waiting: [BrokerEntry] = []
        var head = 0
        /// The last read stopped at the read-ahead: storage holds more actions after `readThrough`.
        /// Saves after it are left to the next read: a read ahead (`append`) once few actions are
        /// left, or, failing that, a read of the whole read-ahead once none is (``needsRefill``).
        var truncated = false
        /// The position of the last action the reads of a `truncated` queue returned.
        var readThrough: Int64 = .min
        /// A read ahead under way: what it may have missed is kept to be applied after it.
        var append: Append?

        struct Append {
            /// The request's token: an answer to an earlier request is ignored.
            var token: UInt64
            /// Saves after `readThrough` heard meanwhile: applied after the answer (kept if it
            /// reaches them).
            var saved: [BrokerEntry] = []
            /// Actions deleted meanwhile: the answer may still show them.
            var deleted: Set<BrokerActionID> = []
        }
        /// An operator paused the queue (``TaskDatabase/pauseQueues(_:)``), as of its last read: it
        /// starts nothing (an action in flight finishes) until a read shows it resumed.
        var pausedByOperator = false
        /// The sticky head: the action taken to run; it stays first until it succeeds.
        var held: BrokerEntry?
        /// Where the queue stands with the broker's slots and its lease (see ``Slot``).
        var slot = Slot.free
        /// The timer of `held`'s timed retry.
        var timer: UInt64?
        /// Set while the queue is read; the queue runs nothing until it is read.
        var load: Load?
        /// The newest revision a read of this queue saw: a save no newer is already reflected.
        var loadedThrough: Int64 = 0
        /// Read because its claim found the head changed: the queue had its turn in the line, so
        /// once read it takes its turn again first, not at the back (see `loaded`). Not when the
        /// claim that found the change had gone first already (`wentFirst`): a head replaced
        /// again and again would otherwise keep its queue first and the others waiting.
        var claimFoundChange = false
        /// A restart arrived while the queue was being read and its head was paused then: the
        /// restart is reported (`.resumed`) once the read is applied, even if the read already
        /// shows the pause cleared.
        var pausedWhenRestarted = false
        var wentFirst = false

        struct NextClaim {
            var id: BrokerActionID
            var revision: Int64
            /// The timer that ends the claim's use.
            var timer: UInt64
            /// When the claim is too old to use (``BrokerStateMachine/now``), whether or not its
            /// timer has fired: after a stall of the whole process (SIGSTOP, a paused VM) the timer
            /// and the outcome that frees a slot for the head arrive together, in either order.
            var deadline: Duration
        }

        struct Load {
            /// Changes that arrived during the read, applied after it.
            var buffered: [BrokerChange] = []
            /// Read again when this read ends (something changed that cannot be replayed).
            var again = false
            /// A read is under way (`false` while waiting for a retry).
            var inProgress = true
        }

        var pending: Int { waiting.count - head + (held == nil ? 0 : 1) }

        /// Nothing to run, read, claim, store or wait for: the queue may be forgotten, and read
        /// again when it changes.
        var isIdle: Bool {
            pending == 0 && load == nil && slotIsIdle && timer == nil && !truncated && append == nil
        }

        /// Everything read has run, storage holds more, and no read ahead is under way (one
        /// failed): read the queue again.
        var needsRefill: Bool {
            truncated && load == nil && append == nil && !inFlight && pending == 0
        }

        /// Whether the head may be taken now (see `markReady`). Mutating only so that it is called
        /// in place (``BrokerStateMachine/inPlace(_:_:)``), without copying the queue.
        mutating func isRunnable() -> Bool {
            guard load == nil, mayTakeSlot, !pausedByOperator, pending > 0 else { return false }
            return held?.task.pause == nil
        }

        /// The priority of the action the queue runs next.
        var headPriority: Int {
            if let held { return held.task.priority }
            return head < waiting.count ? waiting[head].task.priority : 0
        }

        /// When the queue's next head (not taken yet) was saved to run, if that is after `dueBy`.
        func notDueHead(dueBy: Date) -> Date? {
            guard held == nil, head < waiting.count, let notBefore = waiting[head].task.notBefore, notBefore > dueBy else { return nil }
            return notBefore
        }

        /// Waiting only for its next head's time (saved to run later), or paused by an operator:
        /// the queue may be forgotten like an idle one. The schedule wakes the first
        /// (``BrokerStateMachine/woke(_:into:)``), the change that resumes it the second.
        func isParked(dueBy: Date) -> Bool {
            load == nil && slotIsIdle && timer == nil && append == nil
                && (pausedByOperator || notDueHead(dueBy: dueBy) != nil)
        }

        /// Whether the sticky head is this version of this action (compared in place, without
        /// copying the entry).
        func holds(_ task: StoredTask) -> Bool {
            held?.task.isVersion(of: task) ?? false
        }

        /// The head after the sticky head, if it may be claimed with the sticky head's outcome.
        /// Mutating only to be called in place (see `isRunnable()`).
        mutating func claimableNext(dueBy: Date) -> StoredTask? {
            guard !pausedByOperator, head < waiting.count, waiting[head].action != nil, waiting[head].task.pause == nil,
                  (waiting[head].task.notBefore ?? .distantPast) <= dueBy else { return nil }
            return waiting[head].task
        }
    }
}
