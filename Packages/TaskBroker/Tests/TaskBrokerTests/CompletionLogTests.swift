import Foundation
import GRDB
import TaskBroker
import Testing

/// The SQLite backend logs completions and applies the log in bulk; nothing of that shows.
@Suite(.timeLimit(.minutes(3)))
struct CompletionLogTests {
    private static func count(_ table: String, at path: String) throws -> Int {
        try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? -1 }
    }

    @Test func completionsAreAppliedInBulkOnceTheLogIsLongAndNoRowIsLeftBehind() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        // The log is applied once it holds 16,384 completions.
        let total = 17_000
        let saved = try await database.storage.save((0..<total).map {
            NewTask(key: "k\($0)", collection: "c", queueName: "q\($0 % 7)", payload: Data("{}".utf8))
        })
        for start in stride(from: 0, to: 16_000, by: 500) {
            try await database.storage.finish(saved[start..<start + 500].map { .completed($0) }, owner: "w")
        }
        // Below the threshold: the rows are still on disk, but no read sees them.
        #expect(try Self.count("taskbroker_done", at: path) == 16_000)
        #expect(try await database.snapshot().reduce(0) { $0 + $1.pending } == 1_000)
        // Logging a completion twice counts it once.
        try await database.storage.finish(saved[0..<300].map { .completed($0) }, owner: "w")
        #expect(try Self.count("taskbroker_done", at: path) == 16_000)
        try await database.storage.finish(saved[16_000..<16_400].map { .completed($0) }, owner: "w")
        // Past it: the log was applied and emptied in the same transaction.
        #expect(try Self.count("taskbroker_done", at: path) == 0)
        #expect(try Self.count("taskbroker_action", at: path) == 600)
        let left = try await (0..<7).asyncFlatMap { try await database.storage.tasks(inQueue: "q\($0)") }
        #expect(Set(left.map(\.key)) == Set((16_400..<total).map { "k\($0)" }))
    }

    @Test func aFileWrittenWithTheFirstLogFormatKeepsItsCompletionsWhenOpened() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        // A file as version 2 of the schema left it: "b" completed, its completion still logged.
        let old = try DatabaseQueue(path: path)
        try await old.write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('taskbroker-v1'), ('taskbroker-v2-completion-log');
                CREATE TABLE taskbroker_action (
                    collection TEXT NOT NULL, key TEXT NOT NULL, queue_name TEXT NOT NULL,
                    position INTEGER NOT NULL, revision INTEGER NOT NULL, payload BLOB NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0, pause_kind INTEGER NOT NULL DEFAULT 0, pause_until REAL,
                    PRIMARY KEY (collection, key)
                );
                CREATE INDEX taskbroker_action_queue ON taskbroker_action(queue_name, position);
                CREATE TABLE taskbroker_sequence (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
                INSERT INTO taskbroker_sequence (id, value) VALUES (1, 3);
                CREATE TABLE taskbroker_done (id INTEGER PRIMARY KEY, revision INTEGER NOT NULL, collection TEXT NOT NULL, key TEXT NOT NULL);
                INSERT INTO taskbroker_action (collection, key, queue_name, position, revision, payload) VALUES
                    ('c', 'a', 'h-q', 1, 1, '{}'), ('c', 'b', 'h-q', 2, 2, '{}'), ('c', 'c', 'h-q', 3, 3, '{}');
                INSERT INTO taskbroker_done (revision, collection, key) VALUES (2, 'c', 'b');
                """)
        }
        try old.close()
        let database = try await TaskDatabase.sqlite(path: path)
        // Migrated: the log holds revisions only, and actions are indexed by revision.
        let (columns, indexes) = try await DatabaseQueue(path: path).read { db in
            (try db.columns(in: "taskbroker_done").map(\.name), try db.indexes(on: "taskbroker_action").map(\.name))
        }
        #expect(columns == ["revision"])
        #expect(indexes.contains("taskbroker_action_revision"))
        #expect(try await database.storage.tasks(inQueue: "h-q").map(\.key) == ["a", "c"])
        // Saving "b" again enqueues it anew, behind "c", as for any completed action.
        let resaved = try await database.storage.save([NewTask(key: "b", collection: "c", queueName: "h-q", payload: Data("{}".utf8))])
        #expect(try await database.storage.tasks(inQueue: "h-q").map(\.key) == ["a", "c", "b"])
        #expect(resaved.first?.revision == 4)
    }

    @Test func aCompletedActionSavedAgainRunsAgainAfterARestart() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        do {
            let database = try await TaskDatabase.sqlite(path: path)
            let handler = RecordingHandler<TestAction>()
            let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
            try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
            _ = await handler.handled.values(count: 2)
            await broker.shutdown()
            try await database.save(TestAction(key: "a", queueName: "h-q"))
        }
        let database = try await TaskDatabase.sqlite(path: path)
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        #expect(await handler.handled.values(count: 1) == ["a"])
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }
}

extension Range where Bound == Int {
    fileprivate func asyncFlatMap<T>(_ body: (Int) async throws -> [T]) async rethrows -> [T] {
        var result: [T] = []
        for index in self { result += try await body(index) }
        return result
    }
}
