import Foundation
import GRDB
#if canImport(TaskBrokerPostgres)
import PostgresNIO
#endif
import TaskBroker
#if canImport(TaskBrokerPostgres)
@testable import TaskBrokerPostgres
#endif
import Testing

/// Databases written before the job schema (SQLite schema version 4, PostgreSQL schema version 4)
/// open with every stored action, pause and attempt count, and take what the job schema adds:
/// each action's earliest start, priority and last failure.
@Suite(.timeLimit(.minutes(3)))
struct JobSchemaMigrationTests {
    /// A file exactly as schema version 4 left it (its four migrations, recorded as GRDB records
    /// them), with three queues: one whose head waits for a retry time after two failures, one
    /// whose head waits for a restart, and one with a completion still in the log.
    @Test func anSQLiteFileOfSchemaVersion4KeepsItsActionsPausesAndAttempts() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let retryAt = 1_900_000_000.25
        let old = try DatabaseQueue(path: path)
        try await old.write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('taskbroker-v1'), ('taskbroker-v2-completion-log'),
                    ('taskbroker-v3-completion-log-by-revision'), ('taskbroker-v4-change-journal');
                CREATE TABLE taskbroker_action (
                    collection TEXT NOT NULL, key TEXT NOT NULL, queue_name TEXT NOT NULL,
                    position INTEGER NOT NULL, revision INTEGER NOT NULL, payload BLOB NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0, pause_kind INTEGER NOT NULL DEFAULT 0, pause_until REAL,
                    PRIMARY KEY (collection, key)
                );
                CREATE INDEX taskbroker_action_queue ON taskbroker_action(queue_name, position);
                CREATE TABLE taskbroker_sequence (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
                INSERT INTO taskbroker_sequence (id, value) VALUES (1, 6);
                CREATE TABLE taskbroker_done (revision INTEGER PRIMARY KEY);
                CREATE UNIQUE INDEX taskbroker_action_revision ON taskbroker_action(revision);
                CREATE TABLE taskbroker_change (seq INTEGER PRIMARY KEY, queue_name TEXT NOT NULL, origin TEXT NOT NULL);
                CREATE TABLE taskbroker_broker (name TEXT PRIMARY KEY, prefix_claim INTEGER NOT NULL);
                INSERT INTO taskbroker_action (collection, key, queue_name, position, revision, payload, attempts, pause_kind, pause_until) VALUES
                    ('actions', 'a1', 'h-retry', 1, 1, '{"key":"a1","collection":"actions","queueName":"h-retry","priority":0}', 2, 1, \(retryAt)),
                    ('actions', 'a2', 'h-retry', 2, 2, '{"key":"a2","collection":"actions","queueName":"h-retry","priority":0}', 0, 0, NULL),
                    ('actions', 'b1', 'h-restart', 3, 3, '{"key":"b1","collection":"actions","queueName":"h-restart","priority":0}', 1, 2, NULL),
                    ('actions', 'c1', 'h-done', 4, 4, '{"key":"c1","collection":"actions","queueName":"h-done","priority":0}', 0, 0, NULL),
                    ('actions', 'c2', 'h-done', 5, 5, '{"key":"c2","collection":"actions","queueName":"h-done","priority":0}', 0, 0, NULL);
                INSERT INTO taskbroker_done (revision) VALUES (4);
                INSERT INTO taskbroker_change (queue_name, origin) VALUES ('h-done', 'another-process');
                """)
        }
        try old.close()

        let database = try await TaskDatabase.sqlite(path: path)
        let columns = try await DatabaseQueue(path: path).read { db in try db.columns(in: "taskbroker_action").map(\.name) }
        #expect(Set(["not_before", "priority", "state", "last_failure", "failed_at"]).isSubset(of: columns), "\(columns)")

        let retrying = try await database.storage.tasks(inQueue: "h-retry")
        #expect(retrying.map(\.key) == ["a1", "a2"])
        #expect(retrying.first?.attempts == 2)
        #expect(retrying.first?.pause == .until(Date(timeIntervalSince1970: retryAt)))
        #expect(retrying.allSatisfy { $0.notBefore == nil && $0.priority == 0 && $0.lastFailure == nil })
        let restarting = try await database.storage.tasks(inQueue: "h-restart")
        #expect(restarting.map(\.key) == ["b1"] && restarting.first?.pause == .untilRestart && restarting.first?.attempts == 1)
        #expect(try await database.storage.tasks(inQueue: "h-done").map(\.key) == ["c2"], "the logged completion stays done")
        let snapshot = try await database.snapshot()
        #expect(snapshot.map(\.pending) == [1, 1, 2] && snapshot.map(\.attempts) == [0, 1, 2], "\(snapshot)")

        // A broker runs the migrated queues: the restarted one and the one with a completion; the
        // failure of the restarted head is stored with its reason.
        let handler = RecordingHandler<TestAction>()
        handler.script("b1", .waitForRestart)
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let events = EventRecorder(broker)
        broker.start()
        try await broker.restartQueues(["h-restart"])
        _ = await events.wait(for: { event in
            if case .failed(queueName: "h-restart", key: "b1", collection: _, result: _) = event { true } else { false }
        })
        #expect(Set(await handler.handled.values(count: 2)) == ["c2", "b1"])
        let failed = try await database.snapshot().first { $0.name == "h-restart" }
        #expect(failed?.attempts == 2)
        #expect(failed?.lastFailure?.reason.contains("restart") == true, "\(String(describing: failed))")
        await broker.shutdown()

        // The new fields round-trip on the migrated file.
        let later = Date(timeIntervalSince1970: 2_000_000_000)
        _ = try await database.storage.save([
            NewTask(key: "d1", collection: "actions", queueName: "other", payload: Data("{}".utf8), notBefore: later, priority: 7),
        ])
        let saved = try await database.storage.tasks(inQueue: "other")
        #expect(saved.first?.notBefore == later && saved.first?.priority == 7 && saved.first?.position == 7)
    }

    /// A schema as version 4 left it: the job columns dropped, no finish function of version 5,
    /// the version recorded as 4; actions with pauses and attempts, and a lease granted before the
    /// upgrade. Opening it migrates it to version 5: everything stays, the lease's outcome stores
    /// through the new finish function, and a failure is stored with its reason.
    #if canImport(TaskBrokerPostgres)
    @Test func aPostgresSchemaOfVersion4KeepsItsActionsPausesAttemptsAndLeases() async throws {
        let store = try TestStore(.postgres)
        let schema = "\"\(store.schema)\""
        let old = try await store.open()
        let saved = try await old.storage.save([
            NewTask(key: "a1", collection: "c", queueName: "q-retry", payload: Data()),
            NewTask(key: "a2", collection: "c", queueName: "q-retry", payload: Data()),
            NewTask(key: "b1", collection: "c", queueName: "q-restart", payload: Data()),
            NewTask(key: "l1", collection: "c", queueName: "q-leased", payload: Data()),
        ])
        let epochs = try await old.storage.claimGranted([saved[3]], owner: "old")
        let retryAt = 1_900_000_000.25
        try await old.write { tx in
            for statement in [
                "UPDATE \(schema).action SET attempts = 2, pause_kind = 1, pause_until = \(retryAt) WHERE key = 'a1'",
                "UPDATE \(schema).action SET attempts = 1, pause_kind = 2 WHERE key = 'b1'",
                """
                ALTER TABLE \(schema).action DROP COLUMN not_before, DROP COLUMN priority, DROP COLUMN state,
                    DROP COLUMN last_failure, DROP COLUMN failed_at
                """,
                "ALTER TABLE \(schema).queue DROP COLUMN paused",
                "DROP FUNCTION \(schema).finish",
                "UPDATE \(schema).meta SET value = 4 WHERE name = 'schema_version'",
            ] {
                try await tx.execute(PostgresQuery(unsafeSQL: statement))
            }
        }

        let migrated = try await store.open()
        let version = try await migrated.write { tx in
            var version: Int64 = 0
            for try await value in try await tx.query(
                PostgresQuery(unsafeSQL: "SELECT value FROM \(schema).meta WHERE name = 'schema_version'")
            ).decode(Int64.self) {
                version = value
            }
            return version
        }
        #expect(version == PostgresSchema.version)
        let retrying = try await migrated.storage.tasks(inQueue: "q-retry")
        #expect(retrying.map(\.key) == ["a1", "a2"])
        #expect(retrying.first?.attempts == 2 && retrying.first?.pause == .until(Date(timeIntervalSince1970: retryAt)))
        #expect(retrying.allSatisfy { $0.notBefore == nil && $0.priority == 0 && $0.lastFailure == nil })
        let restarting = try await migrated.storage.tasks(inQueue: "q-restart")
        #expect(restarting.first?.pause == .untilRestart && restarting.first?.attempts == 1)

        // The lease granted before the upgrade still stores its outcome, now with a reason.
        var leased = saved[3]
        let failure = TaskFailure(reason: "failed before the upgrade", failedAt: Date(timeIntervalSince1970: 1_950_000_000))
        leased.lastFailure = failure
        #expect(try await old.storage.finish([.failed(leased, pause: nil, epoch: epochs[0])], owner: "old") == TaskFinishReport())
        let stored = try await migrated.storage.tasks(inQueue: "q-leased")
        #expect(stored.first?.attempts == 1 && stored.first?.lastFailure == failure, "\(stored)")
    }
    #endif
}
