import AsyncPrimitivesTesting
import Foundation
import TaskBroker
#if canImport(TaskBrokerPostgres)
import TaskBrokerPostgres
#endif
import Testing

/// `save(_:notBefore:priority:)`: when more queues may start than a broker has slots, the queue
/// whose head has the larger priority starts first; ties go in the order the queues became ready,
/// and each queue still runs in order.
@Suite(.timeLimit(.minutes(3)))
struct PriorityTests {
    @Test(arguments: Backend.allCases) func readyQueuesTakeTheOneSlotByTheirHeadsPriority(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = HoldingHandler(holding: "block")
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(maxConcurrentQueues: 1)
        )
        let events = EventRecorder(broker)
        try await database.save(TestAction(key: "block", queueName: "h-block"))
        #expect(await handler.runs.values(count: 1) == ["block"])

        // While the one slot is taken: a low queue, a default one, and a high one whose second
        // action has the default priority (saved in a transaction, with the backend's own API).
        // Paused first, so that the `.paused` and `.resumed` events tell when the broker has read
        // each queue and, once resumed, lined it up for the slot.
        let queues = ["h-high", "h-low", "h-mid"]
        try await database.pauseQueues(queues)
        try await database.save(TestAction(key: "low", queueName: "h-low"), priority: -1)
        try await database.save(TestAction(key: "mid", queueName: "h-mid"))
        switch backend {
        case .sqlite:
            try await database.write { tx in
                try tx.save(TestAction(key: "high-1", queueName: "h-high"), priority: 10)
                try tx.save(TestAction(key: "high-2", queueName: "h-high"))
            }
        #if canImport(TaskBrokerPostgres)
        case .postgres:
            try await database.write { (tx: PostgresTaskTransaction) in
                try await tx.save(TestAction(key: "high-1", queueName: "h-high"), priority: 10)
                try await tx.save(TestAction(key: "high-2", queueName: "h-high"))
            }
        #else
        case .postgres:
            throw PostgresTestServer.NotBuilt()
        #endif
        }
        #expect(try await database.storage.tasks(inQueue: "h-high").map(\.priority) == [10, 0])
        _ = await events.wait(for: { if case .paused = $0 { true } else { false } }, occurrence: 3)
        try await database.resumeQueues(queues)
        _ = await events.wait(for: { if case .resumed = $0 { true } else { false } }, occurrence: 3)

        handler.release()
        _ = await events.wait { $0.isSuccess("low") }
        // high-1 first; then its queue, with a head of priority 0, goes behind h-mid; h-low last.
        #expect(handler.runs.values == ["block", "high-1", "mid", "high-2", "low"])
        await broker.shutdown()
    }
}
