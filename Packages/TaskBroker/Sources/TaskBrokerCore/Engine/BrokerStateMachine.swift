import Foundation
import QueueRetry

/// Every scheduling decision of a broker, as a value: inputs in, outputs out.
///
/// The state machine performs no I/O, reads no clock and starts no task: ``BrokerEngine`` (the
/// shell) feeds it what happened (a queue was read, an outcome was stored, a timer fired) and
/// carries out what it asks for (read these queues, run these actions, store these outcomes,
/// start a timer). Its rules:
///
/// - each queue runs one action at a time, head first in `sort` order, then enqueue order; a failed
///   action stays first (the sticky head) until it succeeds, is deleted or is replaced;
/// - at most `maxConcurrentQueues` queues have an action in flight (claimed, running or having its
///   outcome stored); ready queues take free slots in the order they became ready, so a long queue
///   does not starve the others;
/// - an outcome applies only to the revision that ran: a deleted or replaced action's outcome is
///   discarded, and the new version runs next;
/// - a failed read, claim or store is retried after a capped exponential backoff; the queue keeps
///   its place and its order, nothing runs ahead of it, and the failure is reported (`storageFailed`),
///   then its end (`storageRecovered`);
/// - a queue is runnable only once read: changes that arrive while it is read are buffered and
///   applied after, and a save the read already saw (its revision is not newer) is not applied twice.
struct BrokerStateMachine {
    /// Tunables.
    struct Configuration {
        /// How many queues may have an action in flight at once.
        var maxConcurrentQueues: Int
        /// Whether heads are claimed from storage before they run (shared backends).
        var claimsHeads: Bool
        /// The delay before a failed storage operation is tried again.
        var storageBackoff: Backoff
        /// How long a next head claimed with its predecessor's outcome may wait in the ready line
        /// and still start on that claim (shared backends): a twelfth of the lease. The finish left
        /// at least eleven twelfths of it, and it is not renewed while the queue waits (renewals
        /// cover running actions, every third of the lease), so the head starts with at least five
        /// sixths of a lease left and is renewed before half of it is gone. Later it is claimed again.
        var nextHeadLifetime: Duration = .seconds(1)
        /// How old a claim's answer may be (counted from when the claim was sent) for a granted head
        /// to start on it (shared backends): a quarter of the lease. An older one, answered before
        /// a stall of the whole process (SIGSTOP, a paused VM) and handled after it, may hold a
        /// lease that expired and another worker took: the queue is read and claimed again.
        var claimLifetime: Duration = .seconds(3)
        /// How long, after another worker of the pool said it has room, this one may let queues go
        /// with their outcomes while it has more ready queues than it can run (shared backends): a lease.
        var sharingLifetime: Duration = .seconds(10)
        /// How long a worker with room waits between two asks for queues (shared backends): a
        /// third of the lease.
        var askInterval: Duration = .seconds(3)
        /// How many queues the broker keeps in memory before it forgets those with nothing left to
        /// do (and the names it ignores): a queue name used once (one per user, say) would
        /// otherwise be kept for the broker's lifetime. A forgotten queue is read again when it changes.
        var keepsIdleQueuesUpTo = 1024
        /// How many queues the broker reads ahead of running them: queues read for the first time
        /// plus queues ready and waiting for a slot. Queues beyond it wait, as names, until these
        /// run out (see `readUnread`), so that a broker started over many queues holds a bounded
        /// part of them in memory and starts the first ones after one small read.
        var workingSet = 256
        /// A queue read only in part reads ahead (the next actions after its last one) once this
        /// many or fewer of its actions are left to run: before it runs out, so that the queue's
        /// next head is always known (a shared backend's finish claims it with the outcome).
        var readsAheadBelow = 16
        /// The wall-clock time when the engine's elapsed time was zero: what not-before times
        /// (wall-clock dates) are compared with.
        var wallClockAnchor = Date(timeIntervalSince1970: 0)
        /// Limits on starts per period, by queue-name prefix (see ``RateGate``).
        var rateLimits: [TaskRateLimit] = []
        /// How often the leases of running actions are renewed (shared backends: a third of the
        /// lease), counted from the start of the previous renewal; `nil`: no leases to renew.
        var renewalInterval: Duration?
        /// How soon a failed renewal is tried again: a twelfth of the lease.
        var renewalRetry: Duration = .seconds(1)
    }

    enum Phase: Equatable {
        case running, stopping, abandoning, finished
    }

    enum TimerPurpose {
        case pause(String)
        case retryLoad([String])
        /// A rate limit's bucket may have room again (its oldest start left the window), or a
        /// failed request for starts may be tried again.
        case rateLimit(String)
        case retryClaim([String])
        case retryStore([BrokerOutcome])
        /// The wait of `leaseWait` ends: the lease another worker holds may have expired (the
        /// queue goes first in the line), or a queue let go for another worker of the pool may be
        /// claimed here again (`first: false`, at the back: a takeover's claim goes first).
        case leaseExpiry(String, first: Bool)
        /// Next heads claimed with their predecessors' outcomes must start on that claim before this.
        case nextHeadExpiry([String])
        /// The pool's other workers may have found room since the last ask (`sharing`).
        case sharingEnds
        /// This worker may ask for queues again (`askPause`).
        case askPauseEnds
        /// Listing stored queue names may be tried again.
        case retryList
        /// The earliest not-before time the broker knows of has come (``Schedule``).
        case wake
        /// Reading the schedule may be tried again.
        case retrySchedule
        /// The leases of the running actions are due for renewal (``Renewal``).
        case renewal
    }

    let configuration: Configuration
    /// Whether this broker runs a queue (its name filter, and its claim among the brokers of this
    /// process). A refusal by the filter is remembered (`ignored`); another broker's claim is not.
    let accepts: (String) -> Acceptance
    /// Called with the names of queues the broker forgot (see `Configuration.keepsIdleQueuesUpTo`):
    /// its claim among the brokers of this process ends with them.
    let forgets: ([String]) -> Void
    /// Forget idle queues once more than this many are kept.
    var forgetAbove: Int

    var queues: [String: Queue] = [:]
    /// The engine's elapsed time when the inputs being handled arrived (set before each
    /// ``handle(_:)``): what a claim's age is measured against.
    var now: Duration = .zero
    var phase = Phase.running
    /// Queues with an action in flight.
    var running = 0
    /// Moves of a queue's slot that its transitions refused (see ``Queue/Slot``): a bug of the
    /// machine, which every test of the machine checks never happens.
    var refusedTransitions = 0
    var ignored: Set<String> = []
    /// The queues whose heads may run, waiting for a slot.
    var ready = ReadyLine()
    /// Which queue holds each action the broker knows of (waiting or held).
    var locations: [BrokerActionID: String] = [:]
    var timers: [UInt64: TimerPurpose] = [:]
    /// Rate limits: the starts granted and the queues waiting for one.
    var rate: RateGate
    /// How many of `timers` end a head's pause (a timed retry).
    var pauseTimers = 0
    var nextToken: UInt64 = 0
    /// Consecutive failures per storage operation, for the backoff.
    var failures: [TaskStorageOperation: Int] = [:]
    /// The queues each failing operation holds up.
    var failing: [TaskStorageOperation: Set<String>] = [:]
    var loadsToIssue: [String] = []
    /// Queues whose read under way may take their lease: a stopping broker waits for their answers.
    var claimingReads: Set<String> = []
    var readAheadsToIssue: [ReadAheadRequest] = []
    /// Another worker of the pool has room (shared backends): until the `sharing` timer fires, up
    /// to `sharingBudget` queues whose action starts while more ready queues wait than this worker
    /// can run are let go with the action's outcome instead of being kept for the next head, so
    /// that the other worker can take them. Without it, a busy worker kept every queue it had run,
    /// and a worker that joined later waited for queues until they ran empty (2 processes: 87,200
    /// and 12,800 of 100,000 actions). Bounded by the asker's room, so that a worker restarted
    /// among busy ones does not make them let go of every queue for a lease.
    var sharing: UInt64?
    var sharingBudget = 0
    /// A claim was refused since the last ask because another worker holds the queue.
    var refusedSinceAsk = false
    /// While set, this worker does not ask for queues again (`Configuration.askInterval`).
    var askPause: UInt64?
    /// The renewal of the running actions' leases (shared backends).
    var renewal = Renewal.idle

    /// Whether this broker runs a queue.
    enum Acceptance {
        case runs
        /// Its filter (or name) refuses it: asked once.
        case refused
        /// Another broker of this process runs it: asked again at its next change (the owner may
        /// have forgotten it or stopped by then).
        case ownedElsewhere
    }

    /// Queues known to have stored actions and not read yet, in the order the broker learned of
    /// them, from `unreadHead` on: read as the working set has room (`readUnread`).
    var unread: [String] = []
    var unreadHead = 0
    var unreadSet: Set<String> = []
    /// Queues under their first read (from `unread`, or a change to a queue not in memory).
    var firstReads: Set<String> = []
    /// Stored queues not listed yet come after this name (`nil`: every stored queue was listed).
    var listCursor: String?
    /// A listing of stored queue names is under way, or waits for its retry.
    var listing = false

    /// Actions saved to run later: the wake-up timer and the place in the schedule.
    var schedule: Schedule

    /// The newest revision a read saw in any queue forgotten since (see `forgetIdleQueues`): a
    /// queue read anew skips older saves, as the forgotten one did (SQLite: revisions follow commits).
    var forgottenThrough: Int64 = 0

    init(configuration: Configuration, accepts: @escaping (String) -> Acceptance, forgets: @escaping ([String]) -> Void = { _ in }) {
        self.configuration = configuration
        self.accepts = accepts
        self.forgets = forgets
        forgetAbove = configuration.keepsIdleQueuesUpTo
        schedule = Schedule(start: configuration.wallClockAnchor)
        rate = RateGate(limits: configuration.rateLimits)
    }


    // MARK: - Inputs

    /// Applies inputs in order, then starts what may start: the actions the machine decided, in
    /// the order the engine performs them.
    mutating func handle(_ inputs: [Input]) -> [Output] {
        var out: [Output] = []
        handle(inputs, into: &out)
        return out
    }

    /// ``handle(_:)`` into a buffer: each step below appends what it decides to `out`.
    private mutating func handle(_ inputs: [Input], into out: inout [Output]) {
        for input in inputs {
            handle(input, into: &out)
        }
        if phase == .running {
            launch(into: &out)
            readUnread()
            if let cursor = listCursor, !listing, unread.count - unreadHead < configuration.workingSet {
                listing = true
                out.append(.listQueues(after: cursor))
            }
            askForQueues(into: &out)
            setWakeTimer(into: &out)
            if queues.count > forgetAbove { forgetIdleQueues() }
            if ignored.count > configuration.keepsIdleQueuesUpTo { ignored = [] }
        } else if phase == .stopping, running == 0, claimingReads.isEmpty {
            finish(into: &out)
        }
        if !loadsToIssue.isEmpty, phase != .finished {
            issueLoads(into: &out)
        }
        loadsToIssue = []
        if !readAheadsToIssue.isEmpty, phase != .finished {
            out.append(.readAhead(readAheadsToIssue))
        }
        readAheadsToIssue = []
        scheduleRenewalIfDue(into: &out)
    }

    /// Forgets the queues with nothing to run, read, claim, store or wait for. The next limit is
    /// twice what is left (at least the configured one): a sweep costs O(1) per queue kept since.
    /// Shared backends: a lease the broker may still hold on one (a claim granted for a head that
    /// changed meanwhile) is not let go here: a release runs later, and could end a lease the
    /// broker took anew on the queue meanwhile, with its action running. It expires.
    mutating func forgetIdleQueues() {
        let dueBy = dueBy
        let idle = queues.filter {
            !ready.contains($0.key) && !rate.waiting.contains($0.key) && ($0.value.isIdle || $0.value.isParked(dueBy: dueBy))
        }
        for (queueName, state) in idle {
            forgottenThrough = max(forgottenThrough, state.loadedThrough)
            queues[queueName] = nil
        }
        forgetAbove = max(configuration.keepsIdleQueuesUpTo, queues.count * 2)
        guard !idle.isEmpty else { return }
        let names = idle.keys.sorted()
        forgets(names)
    }

    /// Applies one input (``handle(_:)`` then starts what may start).
    private mutating func handle(_ input: Input, into out: inout [Output]) {
        guard phase != .finished else { return }
        switch input {
        case .start(let queueNames, let listedThrough):
            for queueName in queueNames where queues[queueName] == nil && !unreadSet.contains(queueName) {
                unread.append(queueName)
                unreadSet.insert(queueName)
            }
            listCursor = listedThrough
        case .listed(let queueNames, let next):
            recovered(.load, [], into: &out)
            listing = false
            listCursor = next
            for queueName in queueNames where queues[queueName] == nil && !unreadSet.contains(queueName) && !ignored.contains(queueName) {
                switch accepts(queueName) {
                case .runs: learned(queueName)
                case .refused: ignored.insert(queueName)
                case .ownedElsewhere: break
                }
            }
        case .listFailed(let message):
            let delay = backoff(after: .load)
            _ = startTimer(.retryList, .after(delay), into: &out)
            out.append(.emit(.storageFailed(operation: .load, queueNames: [], message: message, retryIn: delay)))
        case .loaded(let byQueue, let requested, let truncated, let paused, let heldElsewhere, let claimed, let sentAt):
            recovered(.load, requested, into: &out)
            loaded(
                byQueue, requested: requested, truncated: truncated, paused: paused, heldElsewhere: heldElsewhere, claimed: claimed,
                sentAt: sentAt, into: &out
            )
        case .readAhead(let byQueue, let tokens, let truncated):
            for (queueName, token) in tokens.sorted(by: { $0.key < $1.key }) {
                readAhead(queueName, byQueue[queueName] ?? [], token: token, truncated: truncated.contains(queueName), into: &out)
            }
        case .readAheadFailed(let tokens):
            for (queueName, token) in tokens.sorted(by: { $0.key < $1.key }) {
                inPlace(queueName) { if $0.append?.token == token { $0.append = nil } }
                markReady(queueName)
            }
        case .loadFailed(let queueNames, let message):
            claimingReads.subtract(queueNames)
            loadFailed(queueNames, message: message, into: &out)
        case .changes(let changes):
            for change in changes {
                apply(change, into: &out)
            }
        case .committed:
            assertionFailure("the engine hands the machine `changes` in place of `committed`")
        case .claimed(let heads, let results, let sentAt):
            claimed(heads, results: results, sentAt: sentAt, into: &out)
        case .claimFailed(let heads, let message):
            claimFailed(heads, message: message, into: &out)
        case .continued(let queueNames, let sentAt):
            for queueName in queueNames {
                inPlace(queueName) { $0.markContinued(sentAt: sentAt) }
            }
        case .stored(let outcomes):
            stored(outcomes, into: &out)
        case .storeFailed(let outcomes, let message):
            storeFailed(outcomes, message: message, into: &out)
        case .timerFired(let token):
            timerFired(token, into: &out)
        case .startsGranted(let key, let granted, let retryAfter, let at):
            startsGranted(key, granted: granted, retryAfter: retryAfter, at: at, into: &out)
        case .startsFailed(let key, let message):
            startsFailed(key, message: message, into: &out)
        case .notStarted(let tasks):
            notStarted(tasks, into: &out)
        case .leaseLost(let queueNames):
            for queueName in queueNames {
                leaseLost(queueName, into: &out)
            }
        case .renewed(let lost, let sent, let took):
            renewed(lost: lost, sent: sent, took: took, into: &out)
        case .renewFailed:
            renewFailed(into: &out)
        case .outdated(let queueNames):
            for queueName in queueNames {
                inPlace(queueName) { $0.updateFlight { $0.outdated = true } }
            }
        case .shutdown:
            if phase == .running {
                phase = .stopping
                releaseKeptLeases(into: &out)
            }
        case .abandon:
            guard phase == .running || phase == .stopping else { return }
            if phase == .running { releaseKeptLeases(into: &out) }
            phase = .abandoning
            cancelAllTimers(into: &out)
            // Drained first: an outcome a cancelled handler returns afterwards is never stored.
            out.append(.drainCommitter)
            out.append(.cancelHandlers)
        case .committerDrained:
            if phase == .abandoning { finish(into: &out) }
        case .scheduled(let queueNames, let last, let through, let next, let complete):
            scheduled(queueNames, last: last, through: through, next: next, complete: complete, into: &out)
        case .scheduleFailed(let message):
            scheduleFailed(message: message, into: &out)
        }
    }

    /// Asks the pool's other workers to let queues go, when a claim was refused because one of them
    /// holds the queue and this worker still has room after starting what it could (shared
    /// backends). At most once per `askInterval`.
    mutating func askForQueues(into out: inout [Output]) {
        guard configuration.claimsHeads, refusedSinceAsk, askPause == nil,
              running < configuration.maxConcurrentQueues else { return }
        refusedSinceAsk = false
        askPause = startTimer(.askPauseEnds, .after(configuration.askInterval), into: &out)
        out.append(.announceSpareCapacity(room: configuration.maxConcurrentQueues - running))
    }

    mutating func finish(into out: inout [Output]) {
        phase = .finished
        cancelAllTimers(into: &out)
        out.append(.finish)
    }

    mutating func cancelAllTimers(into out: inout [Output]) {
        for token in timers.keys.sorted() {
            out.append(.cancelTimer(token))
        }
        timers = [:]
        pauseTimers = 0
        renewal = .idle
    }
}

extension BrokerStateMachine {
    /// Runs `body` on a queue in place; `nil` if the broker does not own the queue. Neither the
    /// dictionary's getter nor its optional-chained `_modify` (`queues[name]?.method()`) is in
    /// place: both copied the queue, arrays and entries and all (~3 % of a burn-down worker's CPU,
    /// for a few flags), where the values' own subscript yields the stored queue itself.
    @discardableResult
    mutating func inPlace<Result>(_ queueName: String, _ body: (inout Queue) -> Result) -> Result? {
        guard let index = queues.index(forKey: queueName) else { return nil }
        return body(&queues.values[index])
    }
}
