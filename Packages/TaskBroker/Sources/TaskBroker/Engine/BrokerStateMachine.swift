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
    }

    /// What happened.
    enum Input: Sendable {
        /// The broker starts; these stored queues are its own.
        case start([String])
        /// Queues were read: the actions of each requested queue in run order (absent: none stored).
        case loaded([String: [BrokerEntry]], requested: [String])
        /// Reading these queues failed.
        case loadFailed([String], message: String)
        /// Committed changes, in commit order.
        case changes([BrokerChange])
        /// The claim of these heads answered, one `Bool` per head.
        case claimed([StoredTask], granted: [Bool])
        /// The claim of these heads failed.
        case claimFailed([StoredTask], message: String)
        /// These outcomes are committed.
        case stored([BrokerOutcome])
        /// Storing these outcomes failed; nothing of them was applied.
        case storeFailed([BrokerOutcome], message: String)
        /// A timer the machine started has fired.
        case timerFired(UInt64)
        /// Another worker holds these queues now (shared backends): forget them.
        case leaseLost([String])
        /// Stop taking actions; finish once the running ones are stored.
        case shutdown
        /// The shutdown timeout passed: give up on running handlers.
        case abandon
        /// After `abandon`: every outcome handed to the committer has been dealt with.
        case committerDrained
    }

    /// What to do.
    enum Output: Sendable {
        /// Read these queues; answer with `loaded` or `loadFailed`.
        case load([String])
        /// Claim these heads; answer with `claimed` or `claimFailed`.
        case claim([StoredTask])
        /// Run these actions' handlers; their outcomes go to the committer.
        case run([BrokerEntry])
        /// Store these outcomes (through the committer); answer with `stored` or `storeFailed`.
        case store([BrokerOutcome])
        /// Start a timer; answer with `timerFired` unless cancelled first.
        case startTimer(UInt64, TimerDelay)
        /// Cancel a timer.
        case cancelTimer(UInt64)
        /// Report an event.
        case emit(TaskBrokerEvent)
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
    }

    enum Phase: Equatable {
        case running, stopping, abandoning, finished
    }

    /// One queue the broker owns.
    struct Queue {
        /// Actions waiting, in run order, from `head` on.
        var waiting: [BrokerEntry] = []
        var head = 0
        /// The sticky head: the action taken to run; it stays first until it succeeds.
        var held: BrokerEntry?
        /// Whether `held` is claimed, running or having its outcome stored.
        var inFlight = false
        /// The timer of `held`'s timed retry.
        var timer: UInt64?
        /// Set while the queue is read; the queue runs nothing until it is read.
        var load: Load?
        /// The newest revision a read of this queue saw: a save no newer is already reflected.
        var loadedThrough: Int64 = 0
        /// Waiting for a claim to be tried again.
        var blocked = false
        /// The lease was lost while `held` was in flight: drop the queue once its outcome arrives.
        var released = false

        struct Load {
            /// Changes that arrived during the read, applied after it.
            var buffered: [BrokerChange] = []
            /// Read again when this read ends (something changed that cannot be replayed).
            var again = false
            /// A read is under way (`false` while waiting for a retry).
            var inProgress = true
        }

        var pending: Int { waiting.count - head + (held == nil ? 0 : 1) }
    }

    enum TimerPurpose {
        case pause(String)
        case retryLoad([String])
        case retryClaim([String])
        case retryStore([BrokerOutcome])
    }

    let configuration: Configuration
    /// Whether this broker runs a queue (its name filter, and its claim among the brokers of this
    /// process). Asked once per queue name.
    let accepts: (String) -> Bool

    private(set) var queues: [String: Queue] = [:]
    private(set) var phase = Phase.running
    /// Queues with an action in flight.
    private(set) var running = 0
    private var ignored: Set<String> = []
    private var ready: [String] = []
    private var readyHead = 0
    private var readySet: Set<String> = []
    /// Which queue holds each action the broker knows of (waiting or held).
    private var locations: [BrokerActionID: String] = [:]
    private var timers: [UInt64: TimerPurpose] = [:]
    private var nextToken: UInt64 = 0
    /// Consecutive failures per storage operation, for the backoff.
    private var failures: [TaskStorageOperation: Int] = [:]
    /// The queues each failing operation holds up.
    private var failing: [TaskStorageOperation: Set<String>] = [:]
    private var loadsToIssue: [String] = []

    init(configuration: Configuration, accepts: @escaping (String) -> Bool) {
        self.configuration = configuration
        self.accepts = accepts
    }

    /// Whether a timer is pending (for tests).
    var timerCount: Int { timers.count }

    // MARK: - Inputs

    /// Applies inputs in order, then starts what may start. Outputs are appended to `out`.
    mutating func handle(_ inputs: [Input], into out: inout [Output]) {
        for input in inputs {
            handle(input, into: &out)
        }
        if !loadsToIssue.isEmpty {
            out.append(.load(loadsToIssue))
            loadsToIssue = []
        }
        if phase == .running {
            launch(into: &out)
        } else if phase == .stopping, running == 0 {
            finish(into: &out)
        }
    }

    /// Applies one input, then starts what may start.
    mutating func handle(_ input: Input, into out: inout [Output]) -> Void {
        guard phase != .finished else { return }
        switch input {
        case .start(let queueNames):
            for queueName in queueNames where queues[queueName] == nil {
                queues[queueName] = Queue(load: Queue.Load())
                loadsToIssue.append(queueName)
            }
        case .loaded(let byQueue, let requested):
            recovered(.load, requested, into: &out)
            for queueName in requested {
                loaded(queueName, byQueue[queueName] ?? [], into: &out)
            }
        case .loadFailed(let queueNames, let message):
            loadFailed(queueNames, message: message, into: &out)
        case .changes(let changes):
            for change in changes {
                apply(change, into: &out)
            }
        case .claimed(let heads, let granted):
            claimed(heads, granted: granted, into: &out)
        case .claimFailed(let heads, let message):
            claimFailed(heads, message: message, into: &out)
        case .stored(let outcomes):
            stored(outcomes, into: &out)
        case .storeFailed(let outcomes, let message):
            storeFailed(outcomes, message: message, into: &out)
        case .timerFired(let token):
            timerFired(token, into: &out)
        case .leaseLost(let queueNames):
            for queueName in queueNames {
                leaseLost(queueName, into: &out)
            }
        case .shutdown:
            if phase == .running { phase = .stopping }
        case .abandon:
            guard phase == .running || phase == .stopping else { return }
            phase = .abandoning
            cancelAllTimers(into: &out)
            // Drained first: an outcome a cancelled handler returns afterwards is never stored.
            out.append(.drainCommitter)
            out.append(.cancelHandlers)
        case .committerDrained:
            if phase == .abandoning { finish(into: &out) }
        }
    }

    private mutating func finish(into out: inout [Output]) {
        phase = .finished
        cancelAllTimers(into: &out)
        out.append(.finish)
    }

    private mutating func cancelAllTimers(into out: inout [Output]) {
        for token in timers.keys.sorted() {
            out.append(.cancelTimer(token))
        }
        timers = [:]
    }

    // MARK: - Starting actions

    /// Takes the heads of ready queues, up to the cap, longest-waiting queue first; claims them
    /// (shared backends) or runs them.
    private mutating func launch(into out: inout [Output]) {
        var picks: [BrokerEntry] = []
        while running < configuration.maxConcurrentQueues, readyHead < ready.count {
            let queueName = ready[readyHead]
            readyHead += 1
            readySet.remove(queueName)
            guard var state = queues.removeValue(forKey: queueName) else { continue }
            if let pick = take(from: &state, queueName, into: &out) {
                state.inFlight = true
                running += 1
                picks.append(pick)
            }
            queues[queueName] = state
        }
        if readyHead > 1024, readyHead * 2 > ready.count {
            ready.removeFirst(readyHead)
            readyHead = 0
        }
        guard !picks.isEmpty else { return }
        if configuration.claimsHeads {
            out.append(.claim(picks.map(\.task)))
        } else {
            start(picks, into: &out)
        }
    }

    /// The queue's head if it may run now; moves the first waiting action to the sticky head.
    private mutating func take(from state: inout Queue, _ queueName: String, into out: inout [Output]) -> BrokerEntry? {
        guard state.load == nil, !state.inFlight, !state.blocked else { return nil }
        if state.held == nil, state.head < state.waiting.count {
            state.held = state.waiting[state.head]
            state.head += 1
            if state.head > 1024, state.head * 2 > state.waiting.count {
                state.waiting.removeFirst(state.head)
                state.head = 0
            }
        }
        guard let held = state.held else { return nil }
        if let pause = held.task.pause {
            if case .until(let date) = pause, state.timer == nil {
                state.timer = startTimer(.pause(queueName), .until(date), into: &out)
            }
            return nil
        }
        return held
    }

    /// Reports and runs heads that may run (claimed, or not needing a claim).
    private mutating func start(_ picks: [BrokerEntry], into out: inout [Output]) {
        var runs: [BrokerEntry] = []
        var undecodable: [BrokerOutcome] = []
        runs.reserveCapacity(picks.count)
        for pick in picks {
            let task = pick.task
            out.append(.emit(.started(queueName: task.queueName, key: task.key, collection: task.collection, attempt: task.attempts + 1)))
            if pick.action == nil {
                // It cannot run: pause its queue until restarted, durably.
                out.append(.emit(.undecodable(queueName: task.queueName, key: task.key, collection: task.collection)))
                undecodable.append(BrokerOutcome(task: task, result: .waitForRestart, pause: .untilRestart))
            } else {
                runs.append(pick)
            }
        }
        if !runs.isEmpty { out.append(.run(runs)) }
        if !undecodable.isEmpty { out.append(.store(undecodable)) }
    }

    private mutating func claimed(_ heads: [StoredTask], granted: [Bool], into out: inout [Output]) {
        recovered(.claim, heads.map(\.queueName), into: &out)
        var runs: [BrokerEntry] = []
        for (index, head) in heads.enumerated() {
            let queueName = head.queueName
            guard var state = queues.removeValue(forKey: queueName) else { continue }
            defer { queues[queueName] = state }
            guard state.inFlight else { continue }
            guard let held = state.held, held.id == BrokerActionID(head), held.task.revision == head.revision,
                  !state.released, phase == .running else {
                // Deleted, replaced or released while the claim ran, or the broker is stopping: not started.
                endFlight(&state)
                markReadyLater(queueName)
                continue
            }
            if index < granted.count, granted[index] {
                runs.append(held)
            } else {
                // The head is gone or changed, or another worker holds the queue: read it again.
                endFlight(&state)
                state.load = Queue.Load()
                loadsToIssue.append(queueName)
            }
        }
        flushReady()
        start(runs, into: &out)
    }

    private mutating func claimFailed(_ heads: [StoredTask], message: String, into out: inout [Output]) {
        let delay = backoff(after: .claim)
        var names: [String] = []
        for head in heads {
            guard var state = queues.removeValue(forKey: head.queueName) else { continue }
            if state.inFlight {
                endFlight(&state)
                state.blocked = true
                names.append(head.queueName)
            }
            queues[head.queueName] = state
        }
        guard !names.isEmpty else { return }
        failing[.claim, default: []].formUnion(names)
        _ = startTimer(.retryClaim(names), .after(delay), into: &out)
        out.append(.emit(.storageFailed(operation: .claim, queueNames: names, message: message, retryIn: delay)))
    }

    // MARK: - Outcomes

    private mutating func stored(_ outcomes: [BrokerOutcome], into out: inout [Output]) {
        recovered(.store, outcomes.map(\.task.queueName), into: &out)
        for outcome in outcomes {
            let task = outcome.task
            let queueName = task.queueName
            guard var state = queues.removeValue(forKey: queueName) else { continue }
            guard state.inFlight else {
                queues[queueName] = state
                continue
            }
            endFlight(&state)
            if state.released {
                // Another worker holds the queue now; its state is theirs.
                for entry in state.waiting[state.head...] where locations[entry.id] == queueName {
                    locations[entry.id] = nil
                }
                out.append(.emit(.discarded(queueName: queueName, key: task.key, collection: task.collection)))
                continue
            }
            guard var held = state.held, held.id == BrokerActionID(task), held.task.revision == task.revision else {
                // Deleted or replaced while it ran: the store changed nothing; the new version runs next.
                queues[queueName] = state
                out.append(.emit(.discarded(queueName: queueName, key: task.key, collection: task.collection)))
                markReady(queueName)
                continue
            }
            switch outcome.result {
            case .success:
                state.held = nil
                locations[held.id] = nil
                queues[queueName] = state
                out.append(.emit(.succeeded(queueName: queueName, key: task.key, collection: task.collection)))
            case .retry, .waitForRestart:
                held.task.attempts += 1
                held.task.pause = outcome.pause
                state.held = held
                if case .until(let date)? = outcome.pause {
                    state.timer = startTimer(.pause(queueName), .until(date), into: &out)
                }
                queues[queueName] = state
                out.append(.emit(.failed(queueName: queueName, key: task.key, collection: task.collection, result: outcome.result)))
            }
            markReady(queueName)
        }
    }

    private mutating func storeFailed(_ outcomes: [BrokerOutcome], message: String, into out: inout [Output]) {
        let names = outcomes.map(\.task.queueName)
        guard phase != .abandoning else {
            out.append(.emit(.storageFailed(operation: .store, queueNames: names, message: message, retryIn: .zero)))
            return
        }
        // The queues stay in flight: nothing else of theirs runs until the outcome is stored.
        let delay = backoff(after: .store)
        failing[.store, default: []].formUnion(names)
        _ = startTimer(.retryStore(outcomes), .after(delay), into: &out)
        out.append(.emit(.storageFailed(operation: .store, queueNames: names, message: message, retryIn: delay)))
    }

    // MARK: - Reading queues

    private mutating func loaded(_ queueName: String, _ entries: [BrokerEntry], into out: inout [Output]) {
        guard var state = queues.removeValue(forKey: queueName) else { return }
        guard let load = state.load else {
            queues[queueName] = state
            return
        }
        if load.again {
            state.load = Queue.Load()
            queues[queueName] = state
            loadsToIssue.append(queueName)
            return
        }
        state.load = nil
        // Forget what the queue held before, except an action in flight.
        for entry in state.waiting[state.head...] where locations[entry.id] == queueName {
            locations[entry.id] = nil
        }
        if let held = state.held, !state.inFlight {
            if locations[held.id] == queueName { locations[held.id] = nil }
            state.held = nil
        }
        if let timer = state.timer {
            cancelTimer(timer, into: &out)
            state.timer = nil
        }
        state.waiting = []
        state.head = 0
        var list = entries
        for entry in entries {
            state.loadedThrough = max(state.loadedThrough, entry.task.revision)
        }
        if state.inFlight, let held = state.held, let index = list.firstIndex(where: { $0.id == held.id }) {
            if list[index].task.revision == held.task.revision {
                list.remove(at: index)  // the version in flight
            } else {
                state.held = nil  // replaced behind the broker's back: the run in flight is stale
            }
        }
        for entry in list {
            if let other = locations[entry.id], other != queueName {
                removeEntry(entry.id, revision: nil, into: &out)
            }
            locations[entry.id] = queueName
        }
        if !state.inFlight, state.held == nil, let first = list.first, first.task.pause != nil {
            state.held = first
            list.removeFirst()
            if case .until(let date)? = first.task.pause {
                state.timer = startTimer(.pause(queueName), .until(date), into: &out)
            }
        }
        state.waiting = list
        queues[queueName] = state
        for change in load.buffered {
            if case .saved(let entry) = change, entry.task.revision <= state.loadedThrough { continue }
            apply(change, into: &out)
        }
        markReady(queueName)
    }

    private mutating func loadFailed(_ queueNames: [String], message: String, into out: inout [Output]) {
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
    private mutating func reload(_ queueName: String) {
        guard var state = queues.removeValue(forKey: queueName) else {
            guard !ignored.contains(queueName) else { return }
            guard accepts(queueName) else {
                ignored.insert(queueName)
                return
            }
            queues[queueName] = Queue(load: Queue.Load())
            loadsToIssue.append(queueName)
            return
        }
        if state.load == nil {
            state.load = Queue.Load()
            loadsToIssue.append(queueName)
        } else if state.load?.inProgress == true {
            state.load?.again = true
        }
        queues[queueName] = state
    }

    // MARK: - Changes

    private mutating func apply(_ change: BrokerChange, into out: inout [Output]) {
        switch change {
        case .saved(let entry):
            saved(entry, into: &out)
        case .deleted(let task):
            if queues[task.queueName]?.load != nil {
                queues[task.queueName]?.load?.buffered.append(change)
                return
            }
            let id = BrokerActionID(task)
            let queueName = locations[id]
            removeEntry(id, revision: task.revision, into: &out)
            if let queueName { markReady(queueName) }
        case .resumed(let queueNames):
            for queueName in queueNames {
                guard let state = queues[queueName] else { continue }
                if state.load != nil {
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
                reload(queueName)
            }
        }
    }

    private mutating func saved(_ entry: BrokerEntry, into out: inout [Output]) {
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
            reload(queueName)
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
        removeEntry(id, revision: nil, into: &out)
        if let previous, previous != queueName { markReady(previous) }
        guard var current = queues.removeValue(forKey: queueName) else { return }
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
    private func knownRevision(of id: BrokerActionID) -> Int64? {
        guard let queueName = locations[id], let state = queues[queueName] else { return nil }
        if let held = state.held, held.id == id { return held.task.revision }
        return state.waiting[state.head...].first { $0.id == id }?.task.revision
    }

    /// Removes the known version of an action (any version when `revision` is `nil`) from
    /// whichever queue holds it. A removed action in flight keeps running; its outcome is discarded.
    private mutating func removeEntry(_ id: BrokerActionID, revision: Int64?, into out: inout [Output]) {
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
        }
    }

    private mutating func clearPause(_ queueName: String, into out: inout [Output]) {
        guard var state = queues.removeValue(forKey: queueName) else { return }
        if let timer = state.timer {
            cancelTimer(timer, into: &out)
            state.timer = nil
        }
        let wasPaused = state.held?.task.pause != nil
        state.held?.task.pause = nil
        queues[queueName] = state
        if wasPaused { out.append(.emit(.resumed(queueName: queueName))) }
        markReady(queueName)
    }

    private mutating func leaseLost(_ queueName: String, into out: inout [Output]) {
        guard var state = queues.removeValue(forKey: queueName) else { return }
        if let timer = state.timer {
            cancelTimer(timer, into: &out)
        }
        for entry in state.waiting[state.head...] where locations[entry.id] == queueName {
            locations[entry.id] = nil
        }
        if let held = state.held, locations[held.id] == queueName { locations[held.id] = nil }
        guard state.inFlight else { return }
        state.released = true
        state.waiting = []
        state.head = 0
        state.timer = nil
        queues[queueName] = state
    }

    // MARK: - Timers

    private mutating func startTimer(_ purpose: TimerPurpose, _ delay: TimerDelay, into out: inout [Output]) -> UInt64 {
        nextToken += 1
        timers[nextToken] = purpose
        out.append(.startTimer(nextToken, delay))
        return nextToken
    }

    private mutating func cancelTimer(_ token: UInt64, into out: inout [Output]) {
        if timers.removeValue(forKey: token) != nil {
            out.append(.cancelTimer(token))
        }
    }

    private mutating func timerFired(_ token: UInt64, into out: inout [Output]) {
        guard let purpose = timers.removeValue(forKey: token) else { return }
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
        case .retryLoad(let queueNames):
            for queueName in queueNames where queues[queueName]?.load?.inProgress == false {
                queues[queueName]?.load?.inProgress = true
                loadsToIssue.append(queueName)
            }
        case .retryClaim(let queueNames):
            for queueName in queueNames {
                queues[queueName]?.blocked = false
                markReady(queueName)
            }
        case .retryStore(let outcomes):
            out.append(.store(outcomes))
        }
    }

    // MARK: - Helpers

    private mutating func endFlight(_ state: inout Queue) {
        state.inFlight = false
        running -= 1
    }

    /// Queues marked ready while their state was taken out of `queues`.
    private var deferredReady: [String] = []

    private mutating func markReadyLater(_ queueName: String) {
        deferredReady.append(queueName)
    }

    private mutating func flushReady() {
        let names = deferredReady
        deferredReady = []
        for queueName in names {
            markReady(queueName)
        }
    }

    /// Puts a queue at the back of the ready line if its head may run.
    private mutating func markReady(_ queueName: String) {
        guard !readySet.contains(queueName), let state = queues[queueName], state.load == nil, !state.inFlight,
              !state.blocked, state.pending > 0 else { return }
        if let held = state.held, held.task.pause != nil { return }
        ready.append(queueName)
        readySet.insert(queueName)
    }

    private mutating func backoff(after operation: TaskStorageOperation) -> Duration {
        let count = failures[operation, default: 0] + 1
        failures[operation] = count
        return configuration.storageBackoff.delay(afterFailures: count)
    }

    /// An operation succeeded for these queues: reset its backoff, and report the queues it held up.
    private mutating func recovered(_ operation: TaskStorageOperation, _ queueNames: @autoclosure () -> [String], into out: inout [Output]) {
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
