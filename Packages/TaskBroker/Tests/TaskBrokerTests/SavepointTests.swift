import AsyncPrimitivesTesting
import Foundation
import GRDB
import TaskBroker
#if canImport(TaskBrokerPostgres)
import TaskBrokerPostgres
#endif
import Testing

/// Saves and deletes inside `database.write` that the caller rolls back to a savepoint: the
/// transaction commits, but they are not part of it, and the brokers must not hear of them.
@Suite(.timeLimit(.minutes(3)))
struct SavepointTests {
    /// An action saved and rolled back to a savepoint was never stored: it must not run. It is
    /// saved ahead of `real` in the same queue, so had the broker heard of it, it would run first.
    @Test func aSaveRolledBackToASavepointNeverRuns() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await database.write { tx in
            try tx.db.inSavepoint {
                try tx.save(TestAction(key: "ghost", queueName: "h-q"))
                return .rollback
            }
            try tx.save(TestAction(key: "real", queueName: "h-q"))
        }
        #expect(await handler.handled.values(count: 1) == ["real"])
        await broker.shutdown()
        #expect(handler.handled.values == ["real"])
        #expect(try await database.snapshot().isEmpty)
    }

    /// A delete rolled back to a savepoint left the action stored: it must still run. Before the
    /// fix the broker dropped it from memory, and it stayed stored, never run, until a restart.
    @Test func aDeleteRolledBackToASavepointLeavesTheActionToRun() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let handler = GateHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save([TestAction(key: "first", queueName: "h-q"), TestAction(key: "kept", queueName: "h-q")])
        #expect(await handler.started.values(count: 1) == ["first"])
        try await database.write { tx in
            try tx.db.inSavepoint {
                _ = try tx.delete(key: "kept", collection: "actions")
                return .rollback
            }
        }
        try await database.save(TestAction(key: "after", queueName: "h-q"))
        handler.release("first")
        handler.release("kept")
        handler.release("after")
        _ = await recorder.wait { $0.isSuccess("after") }
        await broker.shutdown()
        #expect(handler.started.values == ["first", "kept", "after"])
        #expect(try await database.snapshot().isEmpty)
    }

    /// The same on PostgreSQL: PostgreSQL drops the notifications of a subtransaction that rolls back.
    #if canImport(TaskBrokerPostgres)
    @Test func aSaveRolledBackToASavepointNeverRunsOnPostgres() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await database.write { (tx: PostgresTaskTransaction) in
            try await tx.execute("SAVEPOINT before_ghost")
            try await tx.save(TestAction(key: "ghost", queueName: "h-q"))
            try await tx.execute("ROLLBACK TO SAVEPOINT before_ghost")
            try await tx.save(TestAction(key: "real", queueName: "h-q"))
        }
        #expect(await handler.handled.values(count: 1) == ["real"])
        await broker.shutdown()
        #expect(handler.handled.values == ["real"])
        #expect(try await database.snapshot().isEmpty)
    }
    #endif
}
