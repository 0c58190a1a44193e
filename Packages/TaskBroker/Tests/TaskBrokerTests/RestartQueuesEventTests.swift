import TaskBroker
import Testing

/// `restartQueues` reports `.resumed` for a queue paused by a failure, on every backend, before
/// the paused action starts again (`TaskBrokerEvent.resumed`'s documentation). On PostgreSQL the
/// restart reaches the brokers of every process through the change feed, which names the queues
/// it resumed.
@Suite(.timeLimit(.minutes(3)))
struct RestartQueuesEventTests {
    @Test(arguments: Backend.allCases) func restartQueuesReportsResumedBeforeTheActionRunsAgain(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        handler.script("a", .waitForRestart)
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let recorder = EventRecorder(broker)
        broker.start()
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        _ = await recorder.wait { $0.isFailure }
        try await database.restartQueues(["h-q"])
        let events = await recorder.wait { $0.isSuccess("b") }
        let resumed = events.firstIndex(of: .resumed(queueName: "h-q"))
        let secondStart = events.firstIndex(of: .started(queueName: "h-q", key: "a", collection: "actions", attempt: 2))
        #expect(resumed != nil, "events: \(events)")
        #expect(secondStart != nil, "events: \(events)")
        if let resumed, let secondStart { #expect(resumed < secondStart, "events: \(events)") }
        await broker.shutdown()
    }
}
