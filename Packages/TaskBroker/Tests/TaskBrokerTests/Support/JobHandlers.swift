import AsyncPrimitivesTesting
import Foundation
import Synchronization
import TaskBroker

/// Records each run as `key#attempt`; the keys in `failing` ask to be retried at once, those in
/// `refusing` go to the dead letters ("no such address").
final class AttemptRecorder: AsyncTaskQueueHandler {
    let runs = EventCollector<String>()
    private let keys = Mutex<(failing: Set<String>, refusing: Set<String>)>(([], []))

    var failing: Set<String> {
        get { keys.withLock { $0.failing } }
        set { keys.withLock { $0.failing = newValue } }
    }

    var refusing: Set<String> {
        get { keys.withLock { $0.refusing } }
        set { keys.withLock { $0.refusing = newValue } }
    }

    func handle(_ action: TestAction, context: TaskContext) async -> TaskResult {
        runs.record("\(action.key)#\(context.attempt)")
        if refusing.contains(action.key) { return .deadLetter(reason: "no such address") }
        return failing.contains(action.key) ? .retry(after: .zero) : .success
    }
}

/// Records each run; the run of `holding` waits until `release()`.
final class HoldingHandler: AsyncTaskQueueHandler {
    let runs = EventCollector<String>()
    private let holding: String?
    private let gate = Mutex<(open: Bool, waiting: CheckedContinuation<Void, Never>?)>((false, nil))

    init(holding: String?) {
        self.holding = holding
    }

    func handle(_ action: TestAction, context _: TaskContext) async -> TaskResult {
        runs.record(action.key)
        if action.key == holding {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let isOpen = gate.withLock { gate -> Bool in
                    if gate.open { return true }
                    gate.waiting = continuation
                    return false
                }
                if isOpen { continuation.resume() }
            }
        }
        return .success
    }

    func release() {
        let waiting = gate.withLock { gate -> CheckedContinuation<Void, Never>? in
            gate.open = true
            defer { gate.waiting = nil }
            return gate.waiting
        }
        waiting?.resume()
    }
}

/// Records each run as `key#attempt`; a key starting with `hang` runs until its task is cancelled
/// (then recorded in `cancelled`).
final class HangingHandler: AsyncTaskQueueHandler {
    let runs = EventCollector<String>()
    let cancelled = EventCollector<String>()

    func handle(_ action: TestAction, context: TaskContext) async -> TaskResult {
        runs.record("\(action.key)#\(context.attempt)")
        guard action.key.hasPrefix("hang") else { return .success }
        await Self.untilCancelled()
        if Task.isCancelled { cancelled.record(action.key) }
        return .success
    }

    /// Returns once the current task is cancelled (at once if it already is).
    private static func untilCancelled() async {
        let waiting = Mutex<(cancelled: Bool, continuation: CheckedContinuation<Void, Never>?)>((false, nil))
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = waiting.withLock { state -> Bool in
                    if state.cancelled { return true }
                    state.continuation = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = waiting.withLock { state -> CheckedContinuation<Void, Never>? in
                state.cancelled = true
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume()
        }
    }
}

/// A seed-style handler whose first run never calls its completion; the test may call it late
/// (``completeFirstRun(success:)``). Later runs succeed at once.
final class SilentFirstRunHandler: TaskQueueHandler {
    let runs = EventCollector<String>()
    private let first = Mutex<(@Sendable (Bool, TimeInterval) -> Void)?>(nil)

    func handleNextItem(_ action: TestAction, completion: @escaping @Sendable (Bool, TimeInterval) -> Void) {
        runs.record(action.key)
        let kept = first.withLock { first -> Bool in
            guard runs.count == 1 else { return false }
            first = completion
            return true
        }
        if !kept { completion(true, 0) }
    }

    /// Calls the first run's completion now.
    func completeFirstRun(success: Bool) {
        first.withLock { $0 }?(success, 0)
    }
}

/// Records each run's key; every run waits until `open()`, and the most runs at once are counted.
final class GatedParallelHandler: AsyncTaskQueueHandler {
    let runs = EventCollector<String>()
    private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>], running: Int, most: Int)>((false, [], 0, 0))

    var mostAtOnce: Int { state.withLock { $0.most } }

    func handle(_ action: TestAction, context _: TaskContext) async -> TaskResult {
        state.withLock { state in
            state.running += 1
            state.most = max(state.most, state.running)
        }
        runs.record(action.key)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiting.append(continuation)
                return false
            }
            if isOpen { continuation.resume() }
        }
        state.withLock { $0.running -= 1 }
        return .success
    }

    func open() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        waiting.forEach { $0.resume() }
    }
}

/// Records each run as `key#attempt`; the first attempt asks to be retried after `after`.
final class RetryOnceHandler: AsyncTaskQueueHandler {
    let runs = EventCollector<String>()
    let after: Duration

    init(after: Duration) {
        self.after = after
    }

    func handle(_ action: TestAction, context: TaskContext) async -> TaskResult {
        runs.record("\(action.key)#\(context.attempt)")
        return context.attempt == 1 ? .retry(after: after) : .success
    }
}

/// Records each run as `key#attempt`; the first attempt waits for a restart.
final class RestartOnceHandler: AsyncTaskQueueHandler {
    let runs = EventCollector<String>()

    func handle(_ action: TestAction, context: TaskContext) async -> TaskResult {
        runs.record("\(action.key)#\(context.attempt)")
        return context.attempt == 1 ? .waitForRestart : .success
    }
}
