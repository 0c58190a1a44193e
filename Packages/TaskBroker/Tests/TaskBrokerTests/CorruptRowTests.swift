import Foundation
import GRDB
import TaskBroker
import Testing

/// A row of `taskbroker_action` that holds a value of the wrong type (SQLite keeps any value in
/// any column of an ordinary table: a hand edit, another tool, damage) is a typed error when it
/// is read, never a crash. Rows that GRDB copies (`fetchOne`, `fetchAll`: a delete's or a
/// restart's `RETURNING` rows) used to trap in its non-throwing subscripts; rows read through a
/// cursor are converted by SQLite itself and never trapped. Found with the `TaskRowFuzzer` fuzz
/// target (`Fuzz/`), whose regression inputs in `Fuzz/Regressions/TaskRowFuzzer/` are these rows.
@Suite(.timeLimit(.minutes(3)))
struct CorruptRowTests {
    @Test(arguments: [
        "attempts = 'many'",
        "revision = x'00'",
        "pause_kind = 'soon'",
        "payload = 42",
        "pause_kind = 1, pause_until = 1e999",
    ])
    func aRowWithAValueOfTheWrongTypeIsACorruptDatabaseErrorNotACrash(change: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        _ = try await database.storage.save([
            NewTask(key: "a", collection: "c", queueName: "h-q", payload: Data("{}".utf8)),
            NewTask(key: "b", collection: "c", queueName: "h-q", payload: Data("{}".utf8)),
        ])
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE taskbroker_action SET \(change) WHERE key = 'a'")
        }
        let error = await #expect(throws: TaskBrokerError.self) {
            _ = try await database.delete(key: "a", collection: "c")
        }
        #expect(error?.code == .corruptDatabase)
        // Nothing was deleted, and the other action is untouched.
        let keys = try await DatabaseQueue(path: path).read { db in
            try String.fetchAll(db, sql: "SELECT key FROM taskbroker_action ORDER BY key")
        }
        #expect(keys == ["a", "b"])
    }

    /// A stored failure count at its largest (a hand edit) neither traps when the action starts
    /// (its attempt number) nor when it fails again: the count stays at its largest.
    @Test func anAttemptCountAtItsLargestRunsAndFailsWithoutACrash() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE taskbroker_action SET attempts = 9223372036854775807")
        }
        let handler = CallbackHandler()
        handler.answer("a", success: false, retryTimeout: -1)
        // Started once the recorder listens: the stored action may start, and fail, at once.
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let events = EventRecorder(broker)
        broker.start()
        let seen = await events.wait(for: { event in
            if case .failed = event { true } else { false }
        })
        #expect(seen.contains(TaskBrokerEvent.started(queueName: "h-q", key: "a", collection: "actions", attempt: Int.max)))
        await broker.shutdown()
        #expect(try await database.snapshot().first?.attempts == Int.max)
    }

    /// The revision counter at its largest (a hand edit): a save is a typed error, not a trap.
    @Test func aRevisionCounterAtItsLargestFailsASaveWithACorruptDatabaseError() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE taskbroker_sequence SET value = 9223372036854775807")
        }
        let error = await #expect(throws: TaskBrokerError.self) {
            try await database.save(TestAction(key: "b", queueName: "h-q"))
        }
        #expect(error?.code == .corruptDatabase)
        #expect(try await database.storage.tasks(inQueue: "h-q").map(\.key) == ["a"])

        // A replay draws a revision too: the same error, and the dead letter stays one.
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE taskbroker_action SET state = 1, attempts = 1, last_failure = 'x', failed_at = 0 WHERE key = 'a'")
        }
        let replay = await #expect(throws: TaskBrokerError.self) {
            try await database.replayDeadLetter(key: "a", collection: "actions")
        }
        #expect(replay?.code == .corruptDatabase)
        #expect(try await database.deadLetters().map(\.key) == ["a"])
    }

    /// Another broker's record with a value of the wrong type: `setup` throws, it does not trap.
    @Test func aBrokerRecordOfTheWrongTypeFailsSetupWithAnErrorNotACrash() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        let first = try await TaskQueueBroker.setup(database: database, name: "first", handler: RecordingHandler<TestAction>())
        await first.shutdown()
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE taskbroker_broker SET prefix_claim = x'00'")
        }
        let reopened = try await TaskDatabase.sqlite(path: path)
        await #expect(throws: (any Error).self) {
            _ = try await TaskQueueBroker.setup(database: reopened, name: "second", handler: RecordingHandler<TestAction>())
        }
    }

    /// A damaged row in one queue (here a pause that ends at no time) holds back that queue only:
    /// the others load and run. The read stopped at the row, and every queue after it in the scan
    /// waited (read again and again, never run).
    @Test func aDamagedRowHoldsBackOnlyItsOwnQueue() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        try await database.save(["h-a", "h-b", "h-c"].flatMap { queue in
            (1...2).map { TestAction(key: "\(queue)-\($0)", queueName: queue) }
        })
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE taskbroker_action SET pause_kind = 1, pause_until = 1e999 WHERE key = 'h-b-2'")
        }
        let reopened = try await TaskDatabase.sqlite(path: path)
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(
            database: reopened, name: "h", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let events = EventRecorder(broker)
        broker.start()
        let seen = await events.wait(for: { event in
            if case .storageFailed(.load, _, _, _) = event { true } else { false }
        })
        guard case .storageFailed(_, let names, _, _)? = seen.last else {
            Issue.record("no load failure was reported: \(seen)")
            return
        }
        #expect(names == ["h-b"], "only the queue of the damaged row waits")
        #expect(Set(await handler.handled.values(count: 4)) == ["h-a-1", "h-a-2", "h-c-1", "h-c-2"])
        await broker.shutdown()
    }
}
