import AsyncPrimitivesTesting
import TaskBroker

/// Holds every action until the test records a release; records the keys that started.
final class HeldHandler: AsyncTaskQueueHandler {
    let started = EventCollector<String>()
    let release = EventCollector<Bool>()

    func handle(_ action: CrashAction, context _: TaskContext) async -> TaskResult {
        started.record(action.key)
        _ = await release.values(count: 1)
        return .success
    }
}
