import Foundation

// What the machine is told (inputs) and what it decides (outputs).
extension BrokerStateMachine {
    /// What happened.
    enum Input: Sendable {
        /// The broker starts; these stored queues are its own. With `listedThrough`, more stored
        /// queues come after that name: list them (`listQueues`) as the unread ones run low.
        case start([String], listedThrough: String? = nil)
        /// A page of stored queue names that the broker's filter accepts, listed after the last
        /// page; `next`: more come after this name.
        case listed([String], next: String?)
        /// Listing stored queue names failed.
        case listFailed(message: String)
        /// Queues were read: the actions of each requested queue in run order (absent: none stored).
        /// A `truncated` queue was read only as far as the read-ahead: more is stored after its last action.
        /// `paused`: the requested queues an operator paused. `heldElsewhere`: the requested queues
        /// whose lease another worker held when read (shared backends), and until when: only their
        /// head was read, and it is not claimed before that lease ends or the queue changes.
        /// `claimed`: the requested queues whose lease the read took (shared backends; the `load`
        /// asked for up to `claimBudget`), with its epoch: each one's first action read is claimed,
        /// by a read sent at `sentAt` (the engine's elapsed time).
        case loaded(
            [String: [BrokerEntry]], requested: [String], truncated: Set<String> = [], paused: Set<String> = [],
            heldElsewhere: [String: Date] = [:], claimed: [String: Int64] = [:], sentAt: Duration = .zero
        )
        /// Reads ahead answered (`readAhead`): for each queue and its request's token, the next
        /// actions after the position asked for (absent: none stored); `truncated` as for `loaded`.
        case readAhead([String: [BrokerEntry]], tokens: [String: UInt64], truncated: Set<String> = [])
        /// These reads ahead failed (by queue, their tokens): the queues are read again once they run out.
        case readAheadFailed([String: UInt64])
        /// Reading these queues failed.
        case loadFailed([String], message: String)
        /// Committed changes, in commit order.
        case changes([BrokerChange])
        /// Committed changes as a listener of the database heard them, at `heardAt`: the engine
        /// decodes their saved actions on its own task (a listener runs no user code) and hands
        /// the machine ``changes(_:)`` in their place. The machine never sees this input.
        case committed([TaskChange], heardAt: Duration)
        /// The claim of these heads answered, one result per head.
        case claimed([StoredTask], results: [TaskClaimResult], sentAt: Duration = .zero)
        /// The claim of these heads failed.
        case claimFailed([StoredTask], message: String)
        /// The outcomes about to be reported `stored` for these queues also claimed their next
        /// heads (shared backends): each may start without a claim, if it is still the head and
        /// its claim is young. `sentAt` is when the finish that claimed them was sent (the
        /// engine's elapsed time): the claim's age counts from then.
        case continued([String], sentAt: Duration = .zero)
        /// These outcomes are committed.
        case stored([BrokerOutcome])
        /// Storing these outcomes failed; nothing of them was applied.
        case storeFailed([BrokerOutcome], message: String)
        /// A timer the machine started has fired.
        case timerFired(UInt64)
        /// Another worker took these queues over (shared backends): the outcome of the action in
        /// flight was not stored; read the queues again.
        case leaseLost([String])
        /// The renewal the machine asked for (`renew`) of the leases `sent` answered after `took`
        /// (on the real clock): those of `lost` were taken over by another worker.
        case renewed(lost: [TaskQueueLease], sent: [TaskQueueLease], took: Duration)
        /// The renewal the machine asked for failed (the engine logged why).
        case renewFailed
        /// The actions in flight in these queues were deleted or replaced in storage before their
        /// outcome was stored (by another process: the change itself may still be on its way):
        /// nothing was stored for them; read the queues again.
        case outdated([String])
        /// Stop taking actions; finish once the running ones are stored.
        case shutdown
        /// The shutdown timeout passed: give up on running handlers.
        case abandon
        /// After `abandon`: every outcome handed to the committer has been dealt with.
        case committerDrained
        /// The schedule answered `findScheduled`: the queues (those this broker's filter takes) of
        /// the actions whose time came, the last entry read, the time asked up to, the next
        /// not-before time after it (when `complete`), and whether every entry up to it was read.
        case scheduled([String], last: TaskScheduleEntry?, through: Date, next: Date?, complete: Bool)
        /// Reading the schedule failed.
        case scheduleFailed(message: String)
        /// Storage recorded `granted` starts of a rate limit's bucket; when fewer than asked, the
        /// next is free after `retryAfter`.
        case startsGranted(String, granted: Int, retryAfter: Duration?, at: Date)
        /// Asking storage for starts failed.
        case startsFailed(String, message: String)
        /// These heads were to run, but their handlers got to start too late for their claims
        /// (the process stalled in between): they did not run.
        case notStarted([StoredTask])
    }

    /// What to do.
    enum Output: Sendable {
        /// Read these queues; answer with `loaded` or `loadFailed`. A shared backend's read may
        /// take the lease of up to `claimBudget` of them, free ones whose head may run now
        /// (`LeaseAwareReads`): the slots the broker has free for them.
        case load([String], claimBudget: Int)
        /// List stored queue names after this one; answer with `listed` or `listFailed`.
        case listQueues(after: String)
        /// Read the next actions of these queues after the positions given; answer with
        /// `readAhead` or `readAheadFailed`.
        case readAhead([ReadAheadRequest])
        /// Read the schedule after this entry up to this time; answer with `scheduled` or `scheduleFailed`.
        case findScheduled(after: TaskScheduleEntry, through: Date)
        /// Claim these heads; answer with `claimed` or `claimFailed`.
        case claim([StoredTask])
        /// Run these actions' handlers; their outcomes go to the committer. `next` holds, for each,
        /// the head its queue runs after it (shared backends): its finish claims that head too.
        /// `epochs` holds, for each, the epoch of the lease it runs under, which its outcome carries.
        case run([BrokerEntry], next: [StoredTask?], epochs: [Int64])
        /// Let go of these leases, just granted or kept as the broker stops (the release outlives
        /// the broker's run, within a limit); nothing answers.
        case release([TaskQueueLease])
        /// Let go again of these leases, which a renewal extended after their outcome had released
        /// them; nothing answers.
        case releaseAgain([TaskQueueLease])
        /// Tell the pool's other workers that this one has room and waits for queues they hold
        /// (``TaskStorage/announceSpareCapacity(pool:room:)``); nothing answers.
        case announceSpareCapacity(room: Int)
        /// Store these outcomes (through the committer); answer with `stored` or `storeFailed`.
        case store([BrokerOutcome])
        /// Extend these leases of queues whose action runs (shared backends); answer with `renewed`
        /// or `renewFailed`.
        case renew([TaskQueueLease])
        /// Start a timer; answer with `timerFired` unless cancelled first.
        case startTimer(UInt64, TimerDelay)
        /// Cancel a timer.
        case cancelTimer(UInt64)
        /// Report an event.
        case emit(TaskBrokerEvent)
        /// Ask storage to record up to `count` starts of a rate limit's bucket; answer with
        /// `startsGranted` or `startsFailed`.
        case acquireStarts(String, limit: TaskRateLimit, count: Int)
        /// Give back `count` starts storage recorded at `at` and that did not happen (fire and forget).
        case releaseStarts(String, at: Date, count: Int)
        /// Cancel the running handlers and ignore their outcomes.
        case cancelHandlers
        /// Accept no more outcomes; store those already handed over, then answer `committerDrained`.
        case drainCommitter
        /// Nothing is left to do: the broker has stopped.
        case finish
    }

    /// When a timer fires.
    enum TimerDelay: Sendable, Equatable {
        /// At a wall-clock date (a stored retry time).
        case until(Date)
        /// After a duration (a storage retry).
        case after(Duration)
        /// After a duration on the real clock, whatever clock the broker was given: a lease
        /// expires on the database server's clock (renewals).
        case realTime(Duration)
    }

    /// A queue's next actions to read: those stored after `after`, by position.
    struct ReadAheadRequest: Sendable, Equatable {
        var queueName: String
        var after: Int64
        var token: UInt64
    }
}
