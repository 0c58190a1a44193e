import AsyncPrimitivesTesting
import Synchronization
import TaskBroker

/// The `async` form: records each run's attempt and answers scripted results.
final class ContextRecordingHandler: AsyncTaskQueueHandler {
    let runs = EventCollector<String>()
    private let script = Mutex<[String: [TaskResult]]>([:])

    /// The next runs of `key` answer `results`, in order; later runs succeed.
    func script(_ key: String, _ results: TaskResult...) {
        script.withLock { $0[key, default: []] += results }
    }

    func handle(_ action: TestAction, context: TaskContext) async -> TaskResult {
        runs.record("\(context.key)#\(context.attempt)@\(context.queueName)")
        return script.withLock { script in
            guard var results = script[action.key], !results.isEmpty else { return .success }
            let result = results.removeFirst()
            script[action.key] = results
            return result
        }
    }
}
