import AsyncPrimitivesTesting
import Foundation
import MetricsTestKit
import TaskBroker
import Testing

/// `TaskQueueGauges` (depth, oldest age, dead letters, queues, paused, by name prefix) and the
/// brokers' `taskbroker_actions_running`, read through swift-metrics' test backend.
@Suite(.timeLimit(.minutes(3)))
struct QueueGaugesTests {
    @Test(arguments: Backend.allCases) func gaugesGroupQueuesByPrefixAndAGonePrefixReadsZero(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let metrics = TestMetrics()
        let gauges = TaskQueueGauges(database: database, factory: metrics)
        try await database.save([
            TestAction(key: "a1", queueName: "mail-alice"), TestAction(key: "a2", queueName: "mail-alice"),
            TestAction(key: "b1", queueName: "mail-bob"), TestAction(key: "r1", queueName: "reports"),
        ])
        try await database.saveParallel(TestAction(key: "p1", queueName: "mail-bulk"))
        try await database.pauseQueues(["mail-bob"])
        // Ninety seconds after the oldest save, on the clock that stamped it (the server's, on PostgreSQL).
        let oldest = try #require(try await database.snapshot().compactMap(\.oldestSavedAt).min())
        let readings = try await gauges.update(now: oldest.addingTimeInterval(90))
        #expect(readings["mail"]?.depth == 3)
        #expect(readings["mail"]?.parallelDepth == 1)
        #expect(readings["mail"]?.queues == 3)
        #expect(readings["mail"]?.paused == 1)
        #expect(readings["reports"]?.depth == 1)
        let age = try #require(readings["mail"]?.oldestAgeSeconds)
        #expect(abs(age - 90) < 0.001, "the oldest was saved 90 s before the reading: \(age)")
        #expect(try metrics.expectGauge("taskbroker_queue_depth", [("prefix", "mail")]).lastValue == 3)
        #expect(try metrics.expectGauge("taskbroker_queue_parallel_depth", [("prefix", "mail")]).lastValue == 1)
        #expect(try metrics.expectGauge("taskbroker_queues_paused", [("prefix", "mail")]).lastValue == 1)
        #expect(try metrics.expectGauge("taskbroker_queue_oldest_age_seconds", [("prefix", "mail")]).lastValue == age)

        #expect(try await database.purge(queueName: "reports") == 1)
        let after = try await gauges.update()
        #expect(after["reports"] == TaskQueueGauges.Reading(), "a prefix whose queues are gone reads 0")
        #expect(try metrics.expectGauge("taskbroker_queue_depth", [("prefix", "reports")]).lastValue == 0)
    }

    @Test func deadLettersAreCountedWhereTheyWere() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        let metrics = TestMetrics()
        let handler = RecordingHandler<TestAction>()
        handler.script("d1", .deadLetter(reason: "no"))
        let broker = try await TaskQueueBroker.setup(database: database, name: "jobs", handler: handler)
        let events = EventRecorder(broker)
        try await database.save(TestAction(key: "d1", queueName: "jobs-1"))
        _ = await events.wait { if case .deadLettered = $0 { true } else { false } }
        await broker.shutdown()
        let readings = try await TaskQueueGauges(database: database, factory: metrics).update()
        #expect(readings["jobs"]?.deadLetters == 1 && readings["jobs"]?.depth == 0)
        #expect(try metrics.expectGauge("taskbroker_queue_dead_letters", [("prefix", "jobs")]).lastValue == 1)
    }

    @Test func aBrokerCountsTheActionsItRuns() async throws {
        let metrics = TestMetrics()
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        let handler = HoldingHandler(holding: "held")
        var configuration = TaskQueueBroker.Configuration()
        configuration.metricsFactory = metrics
        let broker = try await TaskQueueBroker.setup(database: database, name: "gauged", handler: handler, configuration: configuration)
        let events = EventRecorder(broker)
        try await database.save(TestAction(key: "held", queueName: "gauged-1"))
        #expect(await handler.runs.values(count: 1) == ["held"])
        let running = try metrics.expectMeter("taskbroker_actions_running", [("broker", "gauged")])
        #expect(running.lastValue == 1)
        handler.release()
        _ = await events.wait { $0.isSuccess("held") }
        #expect(running.lastValue == 0)
        #expect(try metrics.expectCounter("taskbroker_actions_handled", [("broker", "gauged")]).totalValue == 1)
        await broker.shutdown()
    }
}
