import AsyncPrimitivesTesting
import Synchronization
import TaskBroker

/// Records each run as `key#attempt`; the keys in `failing` ask to be retried at once.
final class AttemptRecorder: AsyncTaskQueueHandler {
    let runs = EventCollector<String>()
    private let failingKeys = Mutex<Set<String>>([])

    var failing: Set<String> {
        get { failingKeys.withLock { $0 } }
        set { failingKeys.withLock { $0 = newValue } }
    }

    func handle(_ action: TestAction, context: TaskContext) async -> TaskResult {
        runs.record("\(action.key)#\(context.attempt)")
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
