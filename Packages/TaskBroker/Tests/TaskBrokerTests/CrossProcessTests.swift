import AsyncPrimitivesTesting
import Foundation
import GRDB
import QueueRetry
import TaskBroker
import Testing

/// Brokers and writers in different processes on one SQLite file, with real processes.
@Suite(.timeLimit(.minutes(3)))
struct CrossProcessTests {
    /// Another process deletes a running action (its change reaches this process through the
    /// file's journal, here not at all), and the run fails: nothing is stored for it, and the
    /// broker does not keep the deleted action as its queue's head to run it again (with a retry
    /// at once, in a loop), but discards it and reads the queue again.
    @Test func aFailedActionThatAnotherProcessDeletedWhileItRanIsNotRunAgain() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        let handler = SteppedHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let events = EventRecorder(broker)
        try await database.save([
            VersionedAction(key: "a", queueName: "h-q", version: 1), VersionedAction(key: "b", queueName: "h-q", version: 1),
        ])
        _ = await handler.runs.values(count: 1)
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "DELETE FROM taskbroker_action WHERE key = 'a'")
        }
        handler.finish("h-q", with: .retry(after: .zero))
        #expect(await handler.runs.values(count: 2).map(\.key) == ["a", "b"], "the deleted action did not run again")
        handler.finish("h-q", with: .success)
        let seen = await events.wait(for: { $0.isSuccess("b") })
        #expect(seen.contains(.discarded(queueName: "h-q", key: "a", collection: BrokerModel.collection)))
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }

    @Test func aSaveFromAnotherProcessStartsOnAnIdleBroker() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        let worker = try CrashHelperRun(arguments: ["serve", path])
        #expect(await worker.line(after: 0) == "ready")
        for index in 0..<5 {
            try await database.save(CrashAction(key: "k\(index)", queueName: "crash-x", index: index))
        }
        for index in 0..<5 {
            let line = await worker.line(after: 1 + index)
            #expect(line == "done k\(index)", "the worker's lines: \(worker.lines.values)")
        }
        // Another process's restart of a paused queue reaches it too (through a read of the queue).
        try await database.save(CrashAction(key: "k5", queueName: "crash-y", index: 5))
        let last = await worker.line(after: 6)
        #expect(last == "done k5", "the worker's lines: \(worker.lines.values)")
        await worker.finish()
        #expect(try await database.snapshot().isEmpty)
    }

    @Test func aWorkerThatFellBehindTheChangeJournalRereadsEveryQueue() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        let worker = try CrashHelperRun(arguments: ["serve", path])
        #expect(await worker.line(after: 0) == "ready")
        // One save that changes more queues than the journal keeps (16,384): by the time the
        // worker reads it, its first entries are pruned.
        let count = 18_000
        try await database.save((0..<count).map { CrashAction(key: "k\($0)", queueName: "crash-q\($0)", index: $0) })
        let lines = await worker.lines.values(count: 1 + count)
        #expect(Set(lines.dropFirst()) == Set((0..<count).map { "done k\($0)" }))
        await worker.finish()
        #expect(try await database.snapshot().isEmpty)
        let journal = try await DatabaseQueue(path: path).read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM taskbroker_change") ?? -1
        }
        #expect(journal == 16_384, "the journal keeps its last 16,384 entries")
    }

    @Test func aSecondWorkerProcessOfTheSameBrokerIsRefusedAtSetupUntilTheFirstDies() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        let worker = try CrashHelperRun(arguments: ["serve", path])
        #expect(await worker.line(after: 0) == "ready")

        let same = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskQueueBroker.setup(database: database, name: "crash", handler: RecordingHandler<TestAction>())
        }
        #expect(same?.code == .queueAlreadyClaimed)
        #expect(same?.message.contains("Another process") == true)
        let overlap = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskQueueBroker.setup(database: database, name: "crash-q", handler: RecordingHandler<TestAction>())
        }
        #expect(overlap?.code == .queueAlreadyClaimed)
        let other = try await TaskQueueBroker.setup(database: database, name: "other", handler: RecordingHandler<TestAction>())
        await other.shutdown()

        await worker.kill()  // SIGKILL: the operating system releases the dead worker's lock
        let handler = RecordingHandler<TestAction>()
        let takeover = try await TaskQueueBroker.setup(database: database, name: "crash", handler: handler)
        try await database.save(TestAction(key: "after", queueName: "crash-q"))
        #expect(await handler.handled.values(count: 1) == ["after"])
        await takeover.shutdown()
    }

    @Test func anotherProcessHoldingTheWriteLockDelaysCommitsAndLosesNothing() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        // Commits give up on the lock after 50 ms, then are retried after 20, 40 … 200 ms.
        let database = try await TaskDatabase.sqlite(path: path, configuration: .init(busyTimeout: 0.05))
        var actions: [TestAction] = []
        for index in 0..<15 {
            for queue in 0..<4 {
                actions.append(TestAction(key: "q\(queue)-\(index)", queueName: "h-q\(queue)"))
            }
        }
        try await database.save(actions)
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler,
            configuration: .init(
                startsAutomatically: false,
                storageRetryBackoff: Backoff(initial: .milliseconds(20), maximum: .milliseconds(200))
            )
        )
        let recorder = EventRecorder(broker)
        let lock = try CrashHelperRun(arguments: ["lock", path])
        #expect(await lock.line(after: 0) == "locked")
        broker.start()

        _ = await recorder.wait { $0.isStorageFailure(.store) }
        let waiting = try await broker.snapshot().filter { $0.storageFailure != nil }
        #expect(!waiting.isEmpty, "the queues show that they wait on storage")
        #expect(handler.handled.count <= 4, "no queue went past its first action")
        lock.send("release")
        #expect(await lock.line(after: 1) == "released")
        await lock.waitForExit()

        _ = await recorder.wait(for: { if case .succeeded = $0 { true } else { false } }, occurrence: 60)
        await broker.shutdown()
        let handled = handler.handled.values
        #expect(handled.count == 60, "each action ran once")
        for queue in 0..<4 {
            #expect(handled.filter { $0.hasPrefix("q\(queue)-") } == (0..<15).map { "q\(queue)-\($0)" })
        }
        #expect(try await database.snapshot().isEmpty)
    }
}
