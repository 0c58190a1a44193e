import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Foundation
import JobChain
import Synchronization
import TaskBroker
import Testing

@Suite(.timeLimit(.minutes(1)))
struct BrokerJobChainTests {
    @Test func brokerRunsAJobChainPerActionAndRetriesTheActionWhenAStepFails() async throws {
        let folder = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: folder.path("tasks.sqlite"))
        let handler = ReportHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "reports", handler: handler)
        let events = EventCollector<TaskBrokerEvent>()
        let succeeded = EventCollector<String>()
        let stream = broker.events
        let listening = Task {
            for await event in stream {
                events.record(event)
                if case .succeeded(_, let key, _) = event { succeeded.record(key) }
            }
        }

        try await database.save([
            ReportAction(key: "r1", queueName: "reports-monthly", failingStepOnFirstAttempt: "render"),
            ReportAction(key: "r2", queueName: "reports-monthly"),
        ])

        #expect(await handler.outcomes.values(count: 3) == [
            "r1 failed: StepFailed(step: \"render\")",
            "r1 ok: fetch,render,publish",
            "r2 ok: fetch,render,publish",
        ])
        #expect(await succeeded.values(count: 2) == ["r1", "r2"])
        // A zero retry timeout may or may not pass through a `.resumed`; everything else is exact.
        let seen = events.values.filter { if case .resumed = $0 { false } else { true } }
        #expect(seen == [
            .started(queueName: "reports-monthly", key: "r1", collection: "reports", attempt: 1),
            .failed(queueName: "reports-monthly", key: "r1", collection: "reports", result: .retry(after: .zero)),
            .started(queueName: "reports-monthly", key: "r1", collection: "reports", attempt: 2),
            .succeeded(queueName: "reports-monthly", key: "r1", collection: "reports"),
            .started(queueName: "reports-monthly", key: "r2", collection: "reports", attempt: 1),
            .succeeded(queueName: "reports-monthly", key: "r2", collection: "reports"),
        ])
        await broker.shutdown()
        listening.cancel()
        #expect(try await database.snapshot().isEmpty)
    }
}
