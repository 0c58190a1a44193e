import Foundation
import QueueRetry
import Synchronization
import TaskBroker

/// How the upload handler behaves: its retry policy and how long a simulated upload takes.
struct HandlerSettings: Sendable {
    /// Attempts before an upload becomes a dead letter.
    var maxAttempts: Int = 5
    /// The delay before each retry, doubling from `initial` up to `maximum`.
    var backoff = Backoff(initial: .milliseconds(20), maximum: .milliseconds(500))
    /// How long an average (4 MB) upload takes; larger files take longer.
    var averageWork: Duration = .milliseconds(2)

    func work(for bytes: Int) -> Duration {
        averageWork * (Double(max(bytes, 1)) / 4_000_000)
    }
}

/// Runs simulated uploads: each fails as its action says, is retried with backoff through the
/// broker's timed retries, and after `maxAttempts` failed attempts becomes a dead letter
/// (`TaskResult.deadLetter(reason:)`): the broker stores it with the reason, in the transaction
/// that records the failure, and its queue goes on.
final class UploadHandler: AsyncTaskQueueHandler {
    typealias Action = UploadAction

    private let settings: HandlerSettings
    private let progress: RunProgress
    private let trace: TraceLog?

    init(settings: HandlerSettings, progress: RunProgress, trace: TraceLog? = nil) {
        self.settings = settings
        self.progress = progress
        self.trace = trace
    }

    func handle(_ action: UploadAction, context: TaskContext) async -> TaskResult {
        let outcome = await attempt(action, context: context)
        trace?.ended(queue: action.queueName, key: action.key, attempt: context.attempt, outcome: outcome.name)
        return outcome.result
    }

    private func attempt(_ action: UploadAction, context: TaskContext) async -> (name: String, result: TaskResult) {
        progress.started(queue: action.queueName)
        trace?.started(queue: action.queueName, key: action.key, attempt: context.attempt)
        let work = settings.work(for: action.bytes)
        if work > .zero {
            try? await Task.sleep(for: work)
        }
        // The broker stores failed attempts, so a restarted run counts on from where the last one stopped.
        let attempt = context.attempt
        let failed = context.previousFailures
        guard action.failsPermanently || failed < action.transientFailures else {
            progress.record(.uploaded(afterRetry: failed > 0))
            return ("uploaded", .success)
        }
        let error = action.failsPermanently ? "HTTP 413: the server rejected the file" : "HTTP 503: the server is busy"
        if attempt >= settings.maxAttempts {
            progress.record(.deadLettered)
            return ("dead", .deadLetter(reason: error))
        }
        progress.record(.retrying(queue: action.queueName))
        return ("retry", .retry(after: settings.backoff.delay(afterFailures: attempt)))
    }
}

/// What happened to one attempt.
enum AttemptOutcome: Sendable {
    case uploaded(afterRetry: Bool)
    case retrying(queue: String)
    case deadLettered
}

/// Counts the outcomes of one run and wakes the runner when every action it started with is
/// handled (or at each outcome, once it waits for the last ones).
final class RunProgress: Sendable {
    struct Counts: Sendable {
        var target = 0
        var uploaded = 0
        var uploadedAfterRetry = 0
        var deadLettered = 0
        var retries = 0
        var waiting: Set<String> = []
        /// When an upload of each queue first started in this run.
        var firstStarts: [String: ContinuousClock.Instant] = [:]
        var handled: Int { uploaded + deadLettered }
        var remaining: Int { max(0, target - handled) }
    }

    private struct State {
        var counts = Counts()
        /// The runner waiting in `wait(untilDone:)`, and whether only the whole target wakes it.
        var waiter: (continuation: CheckedContinuation<Void, Never>, untilDone: Bool)?
        var cancelled = false
    }

    private let state: Mutex<State>

    init(target: Int) {
        state = Mutex(State(counts: Counts(target: target)))
    }

    var counts: Counts {
        state.withLock { $0.counts }
    }

    func started(queue: String) {
        let now = ContinuousClock.now
        state.withLock { state in
            _ = state.counts.waiting.remove(queue)
            if state.counts.firstStarts[queue] == nil { state.counts.firstStarts[queue] = now }
        }
    }

    func record(_ outcome: AttemptOutcome) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            switch outcome {
            case .uploaded(let afterRetry):
                state.counts.uploaded += 1
                if afterRetry { state.counts.uploadedAfterRetry += 1 }
            case .retrying(let queue):
                state.counts.retries += 1
                state.counts.waiting.insert(queue)
            case .deadLettered:
                state.counts.deadLettered += 1
            }
            guard let waiter = state.waiter, !waiter.untilDone || state.counts.remaining == 0 else { return nil }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume()
    }

    /// Expects `more` actions beyond those handled so far (another process enqueued them).
    func expect(more: Int) {
        state.withLock { $0.counts.target = $0.counts.handled + more }
    }

    /// Returns when every action of the run is handled (`untilDone`) or at the next outcome
    /// (otherwise); also on `wake()`, and when the calling task is cancelled.
    func wait(untilDone: Bool) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if untilDone && state.counts.remaining == 0 || state.cancelled { return true }
                    state.waiter = (continuation, untilDone)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.cancelled = true
                defer { state.waiter = nil }
                return state.waiter?.continuation
            }
            waiter?.resume()
        }
    }

    /// Wakes the runner's `wait(untilDone:)` early, so that it looks at the store again.
    func wake() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state.waiter = nil }
            return state.waiter?.continuation
        }
        waiter?.resume()
    }
}
