import Foundation
import TaskBroker
import Testing

/// `TaskDatabase.queueChanges()` as a console uses it: the names of the queues that another
/// handle on the database (another process's, on PostgreSQL its own connection) changes.
@Suite(.timeLimit(.minutes(3)))
struct QueueChangesTests {
    @Test(arguments: Backend.allCases) func everyKindOfChangeNamesItsQueue(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let watcher = try await store.open()
        let writer = try await store.open()
        var changes = try await watcher.queueChanges().makeAsyncIterator()

        try await writer.save([TestAction(key: "a1", queueName: "c-a"), TestAction(key: "b1", queueName: "c-b")])
        #expect(await Self.next(&changes, naming: ["c-a", "c-b"]))
        try await writer.pauseQueues(["c-a"])
        #expect(await Self.next(&changes, naming: ["c-a"]))
        try await writer.resumeQueues(["c-a"])
        #expect(await Self.next(&changes, naming: ["c-a"]))
        #expect(try await writer.delete(key: "a1", collection: "actions"))
        #expect(await Self.next(&changes, naming: ["c-a"]))
        #expect(try await writer.purge(queueName: "c-b") == 1)
        #expect(await Self.next(&changes, naming: ["c-b"]))
        try await writer.saveParallel(TestAction(key: "p1", queueName: "c-p"))
        #expect(await Self.next(&changes, naming: ["c-p"]))
    }

    @Test(arguments: Backend.allCases) func aBrokersRunsNameTheirQueues(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let watcher = try await store.open()
        let worker = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: worker, name: "r", handler: handler)
        var changes = try await watcher.queueChanges().makeAsyncIterator()
        try await worker.save(TestAction(key: "x", queueName: "r-1"))
        // The save names its queue.
        #expect(await Self.next(&changes, naming: ["r-1"]))
        #expect(await handler.handled.values(count: 1) == ["x"])
        // Then the run's completion: a batch comes after it, whatever the snapshot showed before
        // (PostgreSQL names the queue; on SQLite the journal does not name a completion, and the
        // batch is empty: "read again"). Named only, this waited forever on SQLite whenever the
        // snapshot read after the save's batch came before the outcome's commit.
        while try await !watcher.snapshot().isEmpty {
            #expect(await changes.next() != nil, "the stream goes on until the queue is seen empty")
        }
        await broker.shutdown()
    }

    @Test func listeningEndsWhenTheConsumerStops() async throws {
        let store = try TestStore(.sqlite)
        let watcher = try await store.open()
        let writer = try await store.open()
        let (listening, listens) = AsyncStream.makeStream(of: Void.self)
        let task = Task {
            let stream = try await watcher.queueChanges()
            listens.yield()
            var seen = 0
            for await _ in stream { seen += 1 }
            return seen
        }
        var started = listening.makeAsyncIterator()
        _ = await started.next()
        task.cancel()
        // The loop ends once cancelled (the suite's time limit fails a stream that never ends).
        #expect(try await task.value == 0, "nothing was saved while it listened")
        // A listener that stopped leaves the database as it was: saves still work and are seen.
        var changes = try await watcher.queueChanges().makeAsyncIterator()
        try await writer.save(TestAction(key: "after", queueName: "c-after"))
        #expect(await Self.next(&changes, naming: ["c-after"]))
    }

    /// Reads batches until every name of `names` was named; false when the stream ended first.
    private static func next(_ changes: inout AsyncStream<[String]>.Iterator, naming names: Set<String>) async -> Bool {
        var missing = names
        while !missing.isEmpty {
            guard let batch = await changes.next() else { return false }
            missing.subtract(batch)
        }
        return true
    }
}
