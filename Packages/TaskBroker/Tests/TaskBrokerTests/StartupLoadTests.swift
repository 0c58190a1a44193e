import Foundation
import TaskBroker
import Testing

/// A broker started on a file that already holds work reads all its queues in a few scans.
@Suite(.timeLimit(.minutes(3)))
struct StartupLoadTests {
    @Test func aBrokerStartedOnManyStoredQueuesRunsEveryActionInOrderAndSkipsCompletedOnes() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        // More queues than one read statement takes (256), some actions already completed.
        let queues = 300
        let database = try await TaskDatabase.sqlite(path: path)
        let actions = (0..<queues * 3).map { TestAction(key: "k\($0)", queueName: "h-q\($0 % queues)") }
        try await database.save(actions)
        let stored = try await database.storage.tasks(inQueue: "h-q7") + database.storage.tasks(inQueue: "h-q299")
        try await database.storage.finish(stored.filter { $0.key == "k7" || $0.key == "k299" }.map { .completed($0) }, owner: "w")

        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let handled = await handler.handled.values(count: queues * 3 - 2)
        await broker.shutdown()

        #expect(Set(handled) == Set(actions.map(\.key)).subtracting(["k7", "k299"]))
        #expect(handled.count == queues * 3 - 2)
        for queue in 0..<queues {
            let expected = [queue, queue + queues, queue + 2 * queues].map { "k\($0)" }.filter { $0 != "k7" && $0 != "k299" }
            #expect(handled.filter { expected.contains($0) } == expected, "queue h-q\(queue) ran out of order")
        }
        #expect(try await database.snapshot().isEmpty)
    }
}
