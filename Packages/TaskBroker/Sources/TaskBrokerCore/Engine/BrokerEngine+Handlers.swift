import Foundation
import Metrics
import QueueRetry
import Tracing

// Running handlers: each run's outcome (or its time limit's) goes straight to the committer.
extension BrokerEngine {
    // MARK: - Running handlers

    /// What runs one action's handler and hands its outcome over, under the epoch of the lease it
    /// runs under (`nil` when it does not decode).
    func makeRun(_ entry: BrokerEntry, next: StoredTask?, epoch: Int64) -> (@Sendable (LaunchGroup) async -> Void)? {
        guard let action = (entry.action as? TypedActionBox<Handler.Action>)?.value else { return nil }
        let task = entry.task
        let now = time.elapsed()
        metrics.queueWait.recordNanoseconds(max(0, (now - entry.since).nanoseconds))
        let handle = self.handle
        let time = self.time
        let metrics = self.metrics
        let committer = self.committer
        let maxAttempts = configuration.maxAttempts
        let timeout = configuration.actionTimeout.map { max($0, .nanoseconds(1)) }
        let retryBackoff = configuration.retryBackoff
        let context = TaskContext(queueName: task.queueName, key: task.key, collection: task.collection, attempt: task.nextAttempt)
        // Shared backends: a run decided on a young claim that only gets to start much later (the
        // process stalled in between: a paused VM, SIGSTOP) may hold a lease another worker took
        // meanwhile. Not started then.
        let staleAfter: Duration? = storage.isShared ? claimLifetime : nil
        let mailbox = self.mailbox
        return { launch in
            // The handler's result, or the timeout's: whichever comes first is the outcome.
            let once = OnceFlag()
            let deliver: @Sendable (TaskResult, String?) -> Void = { result, reason in
                guard once.take() else { return }
                metrics.running.decrement()
                metrics.handleDuration.recordNanoseconds(max(0, (time.elapsed() - now).nanoseconds))
                let pause: TaskPause?
                switch result {
                case .success: pause = nil
                case .retry(let after): pause = after > .zero ? .until(time.now().addingTimeInterval(after.timeInterval)) : nil
                case .waitForRestart: pause = .untilRestart
                case .deadLetter: pause = nil
                }
                let outcome = BrokerOutcome(
                    task: task, result: result, pause: pause, next: result == .success ? next : nil, epoch: epoch, reason: reason,
                    failedAt: time.now(), maxAttempts: maxAttempts
                )
                // Straight to the committer (through the launch while it still starts handlers):
                // outcomes that arrive while a commit runs share the next one.
                if !launch.collect(outcome) {
                    committer.submit([outcome])
                }
            }
            // The run is a span of the trace its save stored (a consumer span: across processes).
            await withSpan("TaskBroker handle", context: TraceCarrier.context(from: task.traceContext), ofKind: .consumer) { span in
                TraceCarrier.name(task, on: span)
                // Checked last before the handler starts, so that a stall between the check and the
                // start is as short as it can be (a stall anywhere before it is caught).
                if let staleAfter, time.elapsed() - now > staleAfter {
                    span.attributes["taskbroker.result"] = "not started: its claim may have passed to another worker"
                    mailbox.post(.notStarted([task]))
                    return
                }
                metrics.running.increment()
                await Self.runHandler(handle, action, context, in: span, timeout: timeout, retryBackoff: retryBackoff, time: time, deliver: deliver)
            }
        }
    }

    /// What runs one plain parallel action's handler and hands its outcome to `deliver` (`nil` when
    /// it does not decode), with the broker's time limit, `maxAttempts` and failure reasons as for
    /// queues. A run past its time limit is delivered as a failure at once; a callback-form handler
    /// that never completes then holds nothing.
    func makeParallelRun(_ claim: TaskParallelClaim) -> ParallelLane.Start? {
        guard let action = try? payloadDecoder.decode(Handler.Action.self, from: claim.task.payload) else { return nil }
        let task = claim.task
        let handle = self.handle
        let time = self.time
        let metrics = self.metrics
        let maxAttempts = configuration.maxAttempts
        let timeout = configuration.actionTimeout.map { max($0, .nanoseconds(1)) }
        let retryBackoff = configuration.retryBackoff
        let context = TaskContext(queueName: task.queueName, key: task.key, collection: task.collection, attempt: task.nextAttempt)
        return { deliver in
            let started = time.elapsed()
            metrics.running.increment()
            let once = OnceFlag()
            let finish: @Sendable (TaskResult, String?) -> Void = { result, reason in
                guard once.take() else { return }
                metrics.running.decrement()
                metrics.handleDuration.recordNanoseconds(max(0, (time.elapsed() - started).nanoseconds))
                deliver(Self.parallelOutcome(claim, result: result, reason: reason, now: time.now(), maxAttempts: maxAttempts))
            }
            await withSpan("TaskBroker handle", context: TraceCarrier.context(from: task.traceContext), ofKind: .consumer) { span in
                TraceCarrier.name(task, on: span)
                span.attributes["taskbroker.parallel"] = true
                await Self.runHandler(handle, action, context, in: span, timeout: timeout, retryBackoff: retryBackoff, time: time, deliver: finish)
            }
        }
    }

    /// Runs the handler in its run's span, within the time limit if there is one, and hands its
    /// result (or the time limit's failure, with its reason) to `deliver`.
    static func runHandler(
        _ handle: @escaping @Sendable (Handler.Action, TaskContext) async -> TaskResult, _ action: Handler.Action,
        _ context: TaskContext, in span: any Span, timeout: Duration?, retryBackoff: Backoff, time: BrokerTime,
        deliver: @escaping @Sendable (TaskResult, String?) -> Void
    ) async {
        guard let timeout else {
            let result = await handle(action, context)
            TraceCarrier.record(result, reason: nil, in: span)
            deliver(result, nil)
            return
        }
        await run(handle, action, context, timeout: timeout, time: time) {
            let reason = "timed out after \(timeout)"
            TraceCarrier.record(.retry(after: .zero), reason: reason, in: span)
            deliver(.retry(after: retryBackoff.delay(afterFailures: context.attempt)), reason)
        } finished: { result in
            TraceCarrier.record(result, reason: nil, in: span)
            deliver(result, nil)
        }
    }

    /// A handler's result as the outcome of a plain parallel action: the same reasons, dead
    /// letters and retry times as a queue's action gets.
    static func parallelOutcome(
        _ claim: TaskParallelClaim, result: TaskResult, reason: String?, now: Date, maxAttempts: Int?
    ) -> TaskParallelOutcome {
        let pause: TaskPause? = if case .retry(let after) = result, after > .zero { .until(now.addingTimeInterval(after.timeInterval)) } else { nil }
        let outcome = BrokerOutcome(task: claim.task, result: result, pause: pause, reason: reason, failedAt: now, maxAttempts: maxAttempts)
        var finished = claim
        finished.task.lastFailure = outcome.failure
        if result == .success { return TaskParallelOutcome(claim: finished, result: .completed) }
        if outcome.deadLetter { return TaskParallelOutcome(claim: finished, result: .deadLettered) }
        if result == .waitForRestart { return TaskParallelOutcome(claim: finished, result: .held) }
        if case .until(let date) = outcome.pause { return TaskParallelOutcome(claim: finished, result: .failed(retryAt: date)) }
        return TaskParallelOutcome(claim: finished, result: .failed(retryAt: nil))
    }

    /// Runs a handler with a time limit: once `timeout` has passed on the broker's clock,
    /// `timedOut` is called and the handler's task is cancelled (an async handler sees
    /// `Task.isCancelled`); `finished` is called with what the handler returns, also later.
    /// Returns once the handler has returned: never, for a callback-form handler that never calls
    /// its completion (the broker has long gone on without it).
    static func run(
        _ handle: @escaping @Sendable (Handler.Action, TaskContext) async -> TaskResult, _ action: Handler.Action,
        _ context: TaskContext, timeout: Duration, time: BrokerTime,
        timedOut: @escaping @Sendable () -> Void, finished: @escaping @Sendable (TaskResult) -> Void
    ) async {
        await withTaskGroup(of: HandlerRace.self) { group in
            group.addTask { .finished(await handle(action, context)) }
            group.addTask {
                do {
                    try await time.sleep(timeout)
                    return .timedOut
                } catch {
                    return .stopped
                }
            }
            while let next = await group.next() {
                switch next {
                case .finished(let result):
                    finished(result)
                    group.cancelAll()
                case .timedOut:
                    timedOut()
                    group.cancelAll()
                case .stopped:
                    break
                }
            }
        }
    }

    /// Starts the handlers of one launch, each at once on this task until its first suspension.
    /// The outcomes of handlers that finish without suspending reach the committer together when
    /// the launch ends: one wake-up, and they share one commit.
    func launch(_ runs: [@Sendable (LaunchGroup) async -> Void]) {
        let launch = LaunchGroup()
        for run in runs {
            handlers.start { await run(launch) }
        }
        committer.submit(launch.close())
    }
}

/// Which of a handler and its time limit ended first (``BrokerEngine``'s timed run).
private enum HandlerRace: Sendable {
    case finished(TaskResult)
    case timedOut
    /// The timer was cancelled: the handler finished first, or the broker cancelled its handlers.
    case stopped
}
