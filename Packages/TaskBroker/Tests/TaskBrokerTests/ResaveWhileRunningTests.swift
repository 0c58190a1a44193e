import AsyncPrimitivesTesting
import Foundation
import Synchronization
import TaskBroker
import Testing

/// An action saved again while it runs: whatever its run then answers, the version saved last
/// runs at once, not after the hour its run asked for.
@Suite(.timeLimit(.minutes(3)))
struct ResaveWhileRunningTests {
    /// Runs each action; the first run of each waits for a release and asks for a retry in an
    /// hour, the others succeed.
    final class FirstRunRetriesLater: AsyncTaskQueueHandler {
        let runs = EventCollector<String>()
        let release = EventCollector<Bool>()
        private let count = Mutex(0)

        func handle(_ action: TestAction, context _: TaskContext) async -> TaskResult {
            runs.record(action.key)
            let first = count.withLock { count in
                count += 1
                return count == 1
            }
            guard first else { return .success }
            _ = await release.values(count: 1)
            return .retry(after: .seconds(3600))
        }
    }

    @Test(arguments: Backend.allCases)
    func anActionSavedAgainWhileItsRunAsksForARetryRunsAgainAtOnce(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = FirstRunRetriesLater()
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save(TestAction(key: "a", queueName: "handler1-q"))
        _ = await handler.runs.values(count: 1)
        try await database.save(TestAction(key: "a", queueName: "handler1-q"))
        handler.release.record(true)
        #expect(await handler.runs.values(count: 2) == ["a", "a"], "the version saved last runs; the broker said \(recorder.events.values)")
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty, "and completes")
    }
}
