import Dispatch
import Foundation
import Synchronization

// How a job runs: its state machine (start, pause, stop, finish), the delivery of steps outside
// the lock, waiting, and hand-off of commands to their queues. Split from Job.swift by concern;
// no behaviour here is new.

// MARK: - Engine

extension Job {
    enum RestOutcome: Sendable {
        case rest, timedOut, wouldDeadlock
    }

    /// Blocks until the job is at rest, the timeout passes, or waiting could never end.
    func waitForRest(timeout: Duration?) -> RestOutcome {
        enum Decision: Equatable { case rest, wouldDeadlock, wait(UInt64) }
        let onMain = Self.isOnMainQueue
        let waiter = BlockingWaiter()
        let decision = core.withLock { core -> Decision in
            if core.isAtRest { return .rest }
            if onMain, core.mainPending > 0 { return .wouldDeadlock }
            core.nextWaiterID += 1
            let id = core.nextWaiterID
            core.waiters.append(Waiter(id: id, resume: waiter.resume))
            return .wait(id)
        }
        guard case .wait(let id) = decision else {
            return decision == .rest ? .rest : .wouldDeadlock
        }
        let timeoutTimer = timeout.map { timeout in
            timer.schedule(after: timeout) { self.timeOutWaiter(id) }
        }
        let timedOut = waiter.wait()
        timeoutTimer?.cancel()
        return timedOut ? .timedOut : .rest
    }

    func timeOutWaiter(_ id: UInt64) {
        let waiter = core.withLock { core -> Waiter? in
            guard let index = core.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return core.waiters.remove(at: index)
        }
        waiter?.resume(true)
    }

    /// Adds a command; launches it when the job is paused.
    func enqueue(_ command: Command) {
        let deliver = core.withLock { core -> Bool in
            core.commands.append(command)
            if command.isMain { core.mainPending += 1 }
            guard !core.driving, core.state == .paused else { return false }
            Self.start(&core)
            return Self.claimDelivery(&core)
        }
        if deliver { _ = deliverSteps(from: .caller) }
    }

    /// Moves to `.started` with the first command.
    static func start(_ core: inout Core) {
        guard let command = core.commands.first else { return }
        core.driving = true
        core.state = .started
        core.attempt &+= 1
        core.phase = command.delay > .zero ? .delaying(core.attempt) : .due(command, attempt: core.attempt)
        core.steps += [
            .callback(.willStart), .publish(.started), .callback(.didStart),
            .execute(Execution(command: command, attempt: core.attempt)),
        ]
    }

    static func pause(_ core: inout Core) {
        core.state = .paused
        core.steps += [.callback(.willPause), .publish(.paused), .callback(.didPause)]
        rest(&core)
    }

    static func stop(_ core: inout Core) {
        core.state = .stopped
        core.steps += [.callback(.willStop), .publish(.stopped), .callback(.didStop)]
        rest(&core)
    }

    static func rest(_ core: inout Core) {
        core.driving = false
        core.phase = .none
        core.delayTimer = nil
        // Waiters are woken when the steps queued with this rest have been delivered
        // (`deliverSteps`), not here: until then the published state is not the final one.
    }

    /// Makes the caller the one thread that delivers steps, if none is and there are some.
    static func claimDelivery(_ core: inout Core) -> Bool {
        if core.delivering || core.steps.isEmpty { return false }
        core.delivering = true
        return true
    }

    /// Records the outcome of a command and decides what comes next.
    ///
    /// - Returns: The next command when it should run inline on this worker thread.
    func finish(_ execution: Execution, _ result: Result<Void, any Error>, context: Context) -> Execution? {
        let deliver = core.withLock { core -> Bool in
            guard case .running = core.phase, core.attempt == execution.attempt else { return false }
            switch result {
            case .success:
                core.commands.removeFirst()
                if execution.command.isMain { core.mainPending -= 1 }
                if core.state == .interrupted {
                    Self.stop(&core)
                } else {
                    core.steps += [.publish(.finished), .callback(.didFinish)]
                    if core.commands.isEmpty {
                        Self.pause(&core)
                    } else {
                        Self.start(&core)
                    }
                }
            case .failure(let error):
                core.error = error
                Self.stop(&core)
            }
            return Self.claimDelivery(&core)
        }
        return deliver ? deliverSteps(from: context) : nil
    }

    /// Delivers steps in order until there are none left, outside the lock; then, when the
    /// job is at rest, wakes the threads and tasks waiting for it.
    ///
    /// - Returns: A command to run inline on this worker thread, when the last step launches
    ///   one that may.
    func deliverSteps(from context: Context) -> Execution? {
        while true {
            let (batch, woken) = core.withLock { core -> ([Step], [Waiter]) in
                var batch: [Step] = []
                swap(&batch, &core.steps)
                guard batch.isEmpty else { return (batch, []) }
                core.delivering = false
                guard !core.driving, !core.waiters.isEmpty || !core.cancelledWaiters.isEmpty else { return ([], []) }
                let woken = core.waiters
                core.waiters.removeAll()
                core.cancelledWaiters.removeAll()
                return ([], woken)
            }
            if batch.isEmpty {
                for waiter in woken { waiter.resume(false) }
                return nil
            }
            for (index, step) in batch.enumerated() {
                switch step {
                case .callback(let callback):
                    call(callback)
                case .publish(let state):
                    published.store(state.code, ordering: .releasing)
                case .execute(let execution):
                    if index == batch.count - 1, Self.canInline(execution, context),
                        core.withLock({ core -> Bool in
                            guard core.steps.isEmpty else { return false }
                            core.delivering = false
                            return true
                        })
                    {
                        return execution
                    }
                    launch(execution)
                }
            }
        }
    }

    static func canInline(_ execution: Execution, _ context: Context) -> Bool {
        guard case .worker(let qos) = context, execution.command.place == .global(qos),
            execution.command.delay == .zero, case .sync = execution.command.body
        else { return false }
        return true
    }

    func call(_ callback: Callback) {
        switch callback {
        case .willStart: willStart()
        case .didStart: didStart()
        case .didFinish: didFinish()
        case .willPause: willPause()
        case .didPause: didPause()
        case .didInterrupt: didInterrupt()
        case .willStop: willStop()
        case .didStop: didStop()
        }
    }

    /// Waits for the command's delay (if any), then runs it.
    func launch(_ execution: Execution) {
        let delay = execution.command.delay
        guard delay > .zero else {
            run(execution)
            return
        }
        let handle = timer.schedule(after: delay) { self.delayElapsed(execution) }
        let keep = core.withLock { core -> Bool in
            guard case .delaying(let attempt) = core.phase, attempt == execution.attempt else { return false }
            core.delayTimer = handle
            return true
        }
        if !keep { handle.cancel() }
    }

    func delayElapsed(_ execution: Execution) {
        let proceed = core.withLock { core -> Bool in
            guard case .delaying(let attempt) = core.phase, attempt == execution.attempt else { return false }
            core.phase = .due(execution.command, attempt: attempt)
            core.delayTimer = nil
            return true
        }
        if proceed { run(execution) }
    }

    /// Hands the command to its queue.
    func run(_ execution: Execution) {
        let command = execution.command
        switch (command.place, command.body) {
        case (.global(let qos), .sync):
            DispatchQueue.global(qos: qos).async { self.runOnWorker(execution, qos: qos) }
        case (.main, .sync(let body)):
            DispatchQueue.main.async {
                _ = self.finish(execution, Result { try body() }, context: .caller)
            }
        case (.global(let qos), .async(let body)):
            Task(priority: Self.priority(qos)) {
                _ = self.finish(execution, await Self.capture(body), context: .caller)
            }
        case (.main, .async(let body)):
            Task { @MainActor in
                _ = self.finish(execution, await Self.capture(body), context: .caller)
            }
        case (.custom(let tag), let body):
            guard let lane = Registry.shared.lane(tag: tag) else {
                guard beginLaneCommand(execution) else { return }
                let error = JobChainError(
                    code: .unknownQueue,
                    message: "No custom queue is tagged \"\(tag)\"; add it with Job.addQueue(tag:priority:) before a command uses it, then resume() the job."
                )
                DispatchQueue.global(qos: .utility).async {
                    _ = self.finish(execution, .failure(error), context: .caller)
                }
                return
            }
            lane.submit { done in
                // Cancelled or suspended while it waited for the lane: it never starts.
                guard self.beginLaneCommand(execution) else {
                    done()
                    return
                }
                switch body {
                case .sync(let body):
                    lane.queue.async {
                        let result = Result { try body() }
                        done()
                        _ = self.finish(execution, result, context: .caller)
                    }
                case .async(let body):
                    Task(priority: Self.priority(lane.priority)) {
                        let result = await Self.capture(body)
                        done()
                        _ = self.finish(execution, result, context: .caller)
                    }
                }
            }
        }
    }

    /// Starts a custom-tag command once its lane is free: `false` when the job dropped it
    /// meanwhile (`cancel()`) or stopped before it (`suspend()`, then perhaps `resume()`, which
    /// hands it to the lane again under a new attempt).
    func beginLaneCommand(_ execution: Execution) -> Bool {
        core.withLock { core -> Bool in
            guard case .waitingForLane(let attempt) = core.phase, attempt == execution.attempt else { return false }
            core.phase = .running
            return true
        }
    }

    /// Runs sync commands on this global-queue thread as long as the next one may run here.
    func runOnWorker(_ first: Execution, qos: DispatchQoS.QoSClass) {
        var next: Execution? = first
        while let execution = next, case .sync(let body) = execution.command.body {
            next = finish(execution, Result { try body() }, context: .worker(qos))
        }
    }

    static func capture(_ body: @Sendable () async throws -> Void) async -> Result<Void, any Error> {
        do {
            try await body()
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    static func priority(_ qos: DispatchQoS.QoSClass) -> TaskPriority {
        switch qos {
        case .background: .background
        case .utility: .utility
        case .userInitiated: .userInitiated
        case .userInteractive: .high
        default: .medium
        }
    }

    /// A wait's timeout: negative or NaN is no wait, infinite or huge is no limit.
    static func timeout(_ seconds: TimeInterval) -> Duration? {
        if seconds.isNaN || seconds <= 0 { return .zero }
        if seconds > 1e12 { return nil }
        return .seconds(seconds)
    }

    /// A command's delay, or `nil` when it is not a usable number of seconds.
    static func delay(_ seconds: TimeInterval) -> Duration? {
        guard seconds.isFinite, seconds >= 0, seconds <= 1e12 else { return nil }
        return .seconds(seconds)
    }

    static let mainQueueKey: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    /// Whether the caller runs on the main thread or on the main queue (on Linux the main
    /// queue may be drained by another thread).
    static var isOnMainQueue: Bool {
        Thread.isMainThread || DispatchQueue.getSpecific(key: mainQueueKey) == true
    }
}

/// A thread blocked in `await()` until the job rests or its timeout fires.
final class BlockingWaiter: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let timedOut = Locked(false)

    func resume(_ timedOut: Bool) {
        self.timedOut.withLock { $0 = timedOut }
        semaphore.signal()
    }

    /// Blocks until resumed; returns whether the wait timed out.
    func wait() -> Bool {
        semaphore.wait()
        return timedOut.withLock { $0 }
    }
}

extension Job.State {
    /// A compact form for the atomic that publishes the state.
    var code: UInt8 {
        switch self {
        case .ejected: 0
        case .paused: 1
        case .stopped: 2
        case .started: 3
        case .finished: 4
        case .interrupted: 5
        }
    }

    init(code: UInt8) {
        switch code {
        case 1: self = .paused
        case 2: self = .stopped
        case 3: self = .started
        case 4: self = .finished
        case 5: self = .interrupted
        default: self = .ejected
        }
    }
}
