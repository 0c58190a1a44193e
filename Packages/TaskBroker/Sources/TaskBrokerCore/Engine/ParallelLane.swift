import Foundation
import Logging
import QueueRetry
import Synchronization

/// Runs a broker's plain parallel actions (``ParallelTaskStorage``), beside its queues.
///
/// One loop owns the lane's state and reacts to what its child tasks post: it claims ready
/// actions in batches of its free slots (two claims at once while they come back full), starts each claimed
/// action's handler, stores the outcomes in batches (one store at a time: outcomes that arrive
/// meanwhile share the next), and renews the claims of running actions every third of the lease.
/// It claims again when a claim came back full, when the backend reports parallel actions saved or
/// made ready in its scope, and when a timer fires at the earliest time one of them becomes ready
/// (a not-before time, or the expiry of another worker's claim); it never polls.
final class ParallelLane: Sendable {
    /// Runs one claimed action's handler and hands its outcome over (once).
    typealias Start = @Sendable (_ deliver: @escaping @Sendable (TaskParallelOutcome) -> Void) async -> Void
    /// What runs one claimed action (`nil`: the payload does not decode; the action is held until
    /// a restart).
    typealias Run = @Sendable (TaskParallelClaim) -> Start?

    enum Event: Sendable {
        /// Ready actions may be stored (a change was heard, or a timer fired).
        case wake(timer: UInt64?)
        /// A claim answered; `held` is its batch when the backend holds it under a transaction.
        case claimed([TaskParallelClaim], asked: Int, sentAt: Duration, held: (any TaskParallelHeldClaims)?)
        /// A held batch has been held for ``ParallelLane/heldLimit``: settle it with what it has.
        case heldDue(UInt64)
        case claimFailed(String, asked: Int)
        case ran(TaskParallelOutcome)
        case stored([TaskParallelOutcome], refused: [TaskParallelClaim])
        case storeFailed([TaskParallelOutcome], String)
        /// A held batch's settlement ended: its outcomes were stored, or none of it was.
        case settled(UInt64, [TaskParallelOutcome], TaskParallelSettlement)
        case nextTime(Date?)
        /// Reading the next time failed: claim again (and look again) after the backoff.
        case nextTimeFailed(String)
        case lost([TaskParallelClaim])
        /// The backoff after a failed store ended.
        case retryStore
        /// A third of the lease passed since the renewal timer started: renew what runs.
        case renewDue
        /// A renewal of the running actions' claims ended.
        case renewed
        case stop
        case abandon
    }

    let storage: any ParallelTaskStorage
    let scope: @Sendable () async throws -> TaskParallelScope
    let owner: String
    let capacity: Int
    let leaseDuration: Duration
    let time: BrokerTime
    let backoff: Backoff
    let handlers: HandlerTasks
    let emit: @Sendable (TaskBrokerEvent) -> Void
    let logger: Logger
    let mailbox = Mailbox<Event>()
    let finished = Latch()
    /// How many claims the lane has sent (for tests: an idle lane sends none).
    let claimsSent = Atomic<Int>(0)

    /// The most actions one claim asks for.
    static let largestClaim = 1024
    /// How many claims may be under way at once.
    static let claimsAtOnce = 2

    /// How long a held batch waits for its last handlers before it is settled with the outcomes
    /// it has (the rest then run under ordinary claims): a fraction of the time the backend holds
    /// it (half a lease), on the real clock.
    var heldLimit: Duration { min(leaseDuration / 8, .milliseconds(250)) }

    init(
        storage: any ParallelTaskStorage, scope: @escaping @Sendable () async throws -> TaskParallelScope, owner: String,
        capacity: Int, leaseDuration: Duration, time: BrokerTime, backoff: Backoff, handlers: HandlerTasks,
        emit: @escaping @Sendable (TaskBrokerEvent) -> Void, logger: Logger
    ) {
        self.storage = storage
        self.scope = scope
        self.owner = owner
        self.capacity = capacity
        self.leaseDuration = leaseDuration
        self.time = time
        self.backoff = backoff
        self.handlers = handlers
        self.emit = emit
        self.logger = logger
    }

    /// Wakes the lane: a change may have made actions of its scope ready.
    func wake() {
        mailbox.post(.wake(timer: nil))
    }

    func stop() {
        mailbox.post(.stop)
    }

    func abandon() {
        mailbox.post(.abandon)
    }

    struct State {
        enum Phase { case running, stopping, abandoned }
        var phase = Phase.running
        /// The claims of actions whose handlers run (`true`) or whose outcomes are not yet stored.
        var running: [ClaimID: Running] = [:]
        var outcomes: [TaskParallelOutcome] = []
        /// Claims under way (at most ``ParallelLane/claimsAtOnce``), and the slots they asked for.
        var claims = 0
        var reserved = 0
        var claiming: Bool { claims > 0 }
        var storing = false
        /// A store failed: the next waits for the backoff.
        var storeWaiting = false
        /// Whether ready actions may be stored: a claim is due (the first once held actions are released).
        var wanted = false
        /// A renewal waits or runs: one at a time, only while actions run.
        var renewing = false
        /// A wake-up arrived while a claim was under way: claim again after it.
        var wokenDuringClaim = false
        var claimFailures = 0
        var storeFailures = 0
        var nextTimeFailures = 0
        /// Whether the last claim answered came back with all it asked for.
        var lastClaimFull = false
        var timer: (token: UInt64, timer: BrokerTimer)?
        var nextToken: UInt64 = 0
        /// Held batches not yet due for settlement, by number.
        var held: [UInt64: HeldBatch] = [:]
        var nextBatch: UInt64 = 0
        /// Held batches complete or due, to settle at once.
        var settles: [UInt64: HeldBatch] = [:]
        /// Held batches being settled, with the outcomes of their other claims that came meanwhile
        /// (stored as ordinary claims' once the settlement made them so).
        var settling: [UInt64: [TaskParallelOutcome]] = [:]
    }

    /// Runs the lane until it is stopped and every outcome it took is stored (or abandoned).
    func run(run makeRun: @escaping Run) async {
        defer { finished.open() }
        await withDiscardingTaskGroup { group in
            var state = State()
            group.addTask { await self.releaseHeld() }
            while let events = await mailbox.next() {
                for event in events {
                    handle(event, state: &state, group: &group, makeRun: makeRun)
                }
                act(&state, group: &group)
                if !state.running.isEmpty, !state.renewing, state.phase != .abandoned {
                    state.renewing = true
                    let mailbox = self.mailbox
                    let sleep = time.sleep
                    let third = leaseDuration / 3
                    group.addTask {
                        try? await sleep(third)
                        mailbox.post(.renewDue)
                    }
                }
                if state.phase == .stopping, !state.claiming, !state.storing, state.settling.isEmpty, state.outcomes.isEmpty,
                   state.running.isEmpty { break }
                // Given up on: what ran is not stored (its claims are let go below, and it runs again).
                if state.phase == .abandoned, !state.claiming, !state.storing, state.settling.isEmpty { break }
            }
            state.timer?.timer.cancel()
            // Abandoned: held batches roll back (what they hold is ready at once).
            for batch in state.held.values.map(\.claims) + state.settles.values.map(\.claims) {
                await batch.release()
            }
            let left = state.running.values.filter { entry in
                guard let batch = entry.batch else { return true }
                return state.held[batch] == nil && state.settles[batch] == nil
            }.map(\.claim)
            if !left.isEmpty {
                // Abandoned: let the claims go so that another worker runs them at once.
                do {
                    try await storage.releaseParallel(left, owner: owner)
                } catch {
                    logger.warning("could not release \(left.count) parallel claim(s); they expire after the lease: \(error)")
                }
            }
            group.cancelAll()
        }
    }

    private func handle(_ event: Event, state: inout State, group: inout DiscardingTaskGroup, makeRun: Run) {
        switch event {
        case .wake(let token):
            if let token {
                guard state.timer?.token == token else { return }
                state.timer = nil
            }
            if state.claiming { state.wokenDuringClaim = true } else { state.wanted = true }
        case .claimed(let claims, let asked, let sentAt, let heldBatch):
            state.claims -= 1
            state.reserved -= asked
            if state.claimFailures > 0 {
                state.claimFailures = 0
                emit(.storageRecovered(operation: .claim, queueNames: []))
            }
            // A claim answered long before it is handled (the process stalled) may have expired.
            let stale = time.elapsed() - sentAt > leaseDuration / 4
            var notStarted: [TaskParallelClaim] = []
            var batch: UInt64?
            if let heldBatch, !claims.isEmpty {
                if stale || state.phase != .running {
                    group.addTask { await heldBatch.release() }
                } else {
                    state.nextBatch += 1
                    batch = state.nextBatch
                    state.held[state.nextBatch] = HeldBatch(claims: heldBatch, running: claims.count)
                    let due = ContinuousClock.now + heldLimit
                    let mailbox = self.mailbox
                    let number = state.nextBatch
                    group.addTask {
                        try? await Task.sleep(until: due, clock: .continuous)
                        mailbox.post(.heldDue(number))
                    }
                }
            }
            for claim in claims {
                guard !stale, state.phase == .running, let run = makeRun(claim) else {
                    if !stale, state.phase == .running {
                        // Does not decode: held until a broker starts again.
                        emit(.undecodable(queueName: claim.task.queueName, key: claim.task.key, collection: claim.task.collection))
                        state.running[ClaimID(claim)] = Running(claim: claim, handlerRuns: true, batch: batch)
                        ran(TaskParallelOutcome(claim: claim, result: .held), state: &state)
                    } else if heldBatch == nil {
                        notStarted.append(claim)
                    }
                    continue
                }
                state.running[ClaimID(claim)] = Running(claim: claim, handlerRuns: true, batch: batch)
                emit(.started(queueName: claim.task.queueName, key: claim.task.key, collection: claim.task.collection, attempt: claim.task.nextAttempt))
                let mailbox = self.mailbox
                handlers.start {
                    await run { outcome in mailbox.post(.ran(outcome)) }
                }
            }
            if !notStarted.isEmpty {
                group.addTask {
                    try? await self.storage.releaseParallel(notStarted, owner: self.owner)
                }
            }
            state.lastClaimFull = claims.count >= asked
            if claims.count >= asked {
                state.wanted = true
            } else if state.wokenDuringClaim {
                // A change came after the claims were sent: one more claim sees it.
                state.wokenDuringClaim = false
                state.wanted = true
            } else if !state.claiming {
                state.wanted = false
                group.addTask { await self.findNextTime() }
            }
        case .claimFailed(let message, let asked):
            state.claims -= 1
            state.reserved -= asked
            state.claimFailures += 1
            let delay = backoff.delay(afterFailures: state.claimFailures)
            emit(.storageFailed(operation: .claim, queueNames: [], message: message, retryIn: delay))
            // The timer's wake-up claims again (or a change heard before it).
            state.wanted = false
            setTimer(after: delay, state: &state, group: &group)
        case .ran(let outcome):
            ran(outcome, state: &state)
        case .heldDue(let batch):
            if let due = state.held.removeValue(forKey: batch) { state.settles[batch] = due }
        case .settled(let batch, let outcomes, let settlement):
            // What came while it was settled goes with the next store, as ordinary claims'
            // outcomes (refused there if the batch ended: its actions are ready for anyone).
            state.outcomes += state.settling.removeValue(forKey: batch) ?? []
            switch settlement {
            case .stored:
                stored(outcomes, refused: [], state: &state)
            case .ended:
                stored(outcomes, refused: outcomes.map(\.claim), state: &state)
                // Its actions are ready again: look for them.
                if state.claiming { state.wokenDuringClaim = true } else { state.wanted = true }
            }
        case .stored(let outcomes, let refused):
            state.storing = false
            if state.storeFailures > 0 {
                state.storeFailures = 0
                emit(.storageRecovered(operation: .store, queueNames: []))
            }
            stored(outcomes, refused: refused, state: &state)
        case .storeFailed(let outcomes, let message):
            state.storing = false
            storeFailed(outcomes, message, state: &state, group: &group)
        case .retryStore:
            state.storeWaiting = false
        case .renewDue:
            // Not those a held batch still holds: its transaction is their lease.
            let claims = state.running.values.filter { entry in
                guard let batch = entry.batch else { return true }
                return state.held[batch] == nil && state.settles[batch] == nil && state.settling[batch] == nil
            }.map(\.claim)
            if claims.isEmpty {
                state.renewing = false
            } else {
                group.addTask { await self.renew(claims) }
            }
        case .renewed:
            state.renewing = false
        case .nextTime(let date):
            state.nextTimeFailures = 0
            if let date {
                setTimer(after: .timer(until: date, now: time.now()), state: &state, group: &group)
            }
        case .nextTimeFailed(let message):
            // Without it, an action saved to run later (or a dead worker's) would wait for an
            // unrelated wake-up: the timer's claim looks again.
            state.nextTimeFailures += 1
            let delay = backoff.delay(afterFailures: state.nextTimeFailures)
            emit(.storageFailed(operation: .claim, queueNames: [], message: message, retryIn: delay))
            setTimer(after: delay, state: &state, group: &group)
        case .lost(let claims):
            for claim in claims where state.running[ClaimID(claim)]?.handlerRuns == true {
                logger.warning(
                    "lost the claim on parallel action \(claim.task.collection)/\(claim.task.key) while it ran: its claim expired and another worker may run it; this run's outcome will not be stored"
                )
            }
        case .stop:
            if state.phase == .running { state.phase = .stopping }
        case .abandon:
            state.phase = .abandoned
        }
    }

    private func act(_ state: inout State, group: inout DiscardingTaskGroup) {
        // Held batches are settled at once, each on its own: a settlement never waits behind
        // another store (a held claim may keep a lock on a row it did not claim, which an ordinary
        // store of this lane can wait for until that batch is settled).
        if state.phase != .abandoned {
            for (number, batch) in state.settles {
                state.settling[number] = []
                group.addTask { await self.settle(number, batch.claims, batch.outcomes) }
            }
            state.settles = [:]
        }
        if !state.outcomes.isEmpty, !state.storing, !state.storeWaiting, state.phase != .abandoned {
            state.storing = true
            let batch = state.outcomes
            state.outcomes = []
            group.addTask { await self.store(batch) }
        }
        // Outcomes waiting to be stored hold their slots (a slow store slows claims), and so do
        // claims under way. While claims come back full (a busy lane), two at once, each for half
        // the free slots: the database takes the next batch while the last one's rows are decoded
        // and started. A lane woken with little to do sends one.
        let atOnce = state.lastClaimFull ? Self.claimsAtOnce : 1
        while state.phase == .running, state.wanted, state.claims < atOnce, capacity - state.running.count - state.reserved > 0 {
            let free = capacity - state.running.count - state.reserved
            let limit = min(max(1, free / (atOnce - state.claims)), Self.largestClaim)
            state.claims += 1
            state.reserved += limit
            state.wanted = state.claims < atOnce
            group.addTask { await self.claim(limit: limit) }
        }
    }

    private func setTimer(after delay: Duration, state: inout State, group: inout DiscardingTaskGroup) {
        state.timer?.timer.cancel()
        state.nextToken += 1
        let token = state.nextToken
        let timer = BrokerTimer()
        state.timer = (token, timer)
        let deadline = time.elapsed() + delay
        let sleepUntilElapsed = time.sleepUntilElapsed
        let mailbox = self.mailbox
        group.addTask {
            if await timer.sleep(using: { try await sleepUntilElapsed(deadline) }) {
                mailbox.post(.wake(timer: token))
            }
        }
    }

    /// A claim by its action and token (its task's failure changes once it ran).
    typealias ClaimID = TaskParallelClaim.ID

    static func describe(_ error: any Error) -> String {
        (error as? TaskBrokerError)?.message ?? "\(error)"
    }
}
