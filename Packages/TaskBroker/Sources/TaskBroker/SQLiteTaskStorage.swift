import Foundation
import GRDB
import QueuePersistence
import Synchronization

/// The embedded backend: one SQLite file in WAL mode, opened through GRDB.
///
/// All writes of one call are one transaction. `synchronous=FULL` (the default) makes every
/// commit durable before the call returns.
final class SQLiteTaskStorage: TaskStorage {
    let pool: DatabasePool
    let path: String
    /// How many completions the log holds, as of the last committed `finish`; `nil` when unknown
    /// (at open, and after a failed write), then counted again. Only `finish` adds to the log.
    private let loggedCompletions = Mutex<Int?>(nil)

    private init(pool: DatabasePool, path: String) {
        self.pool = pool
        self.path = path
    }

    /// Opens the file through QueuePersistence's ``SQLiteStore`` (WAL, `synchronous` on the
    /// writer, busy timeout, migrations, refusal of newer files, clear errors for corrupt ones).
    static func open(path: String, configuration: TaskDatabase.Configuration) async throws -> SQLiteTaskStorage {
        let options = SQLiteDatabaseOptions(
            synchronous: configuration.synchronous.storeValue,
            busyTimeout: Duration(timeInterval: configuration.busyTimeout),
            createsMissingFile: configuration.createsMissingFile,
            label: "TaskBroker"
        )
        do {
            let store = try SQLiteStore(path: path, options: options, schema: schema)
            return SQLiteTaskStorage(pool: store.pool, path: path)
        } catch {
            throw TaskBrokerError(error)
        }
    }

    /// TaskBroker's tables in a shared file: migrations named `taskbroker-…`.
    static var schema: SQLiteSchema {
        SQLiteSchema(owner: "TaskBroker", migrator: migrator, migrationPrefix: "taskbroker-", version: 3)
    }

    /// The schema history. Add migrations; never edit a shipped one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("taskbroker-v1") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_action (
                    collection TEXT NOT NULL,
                    key TEXT NOT NULL,
                    queue_name TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    revision INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    pause_kind INTEGER NOT NULL DEFAULT 0,
                    pause_until REAL,
                    PRIMARY KEY (collection, key)
                );
                CREATE INDEX taskbroker_action_queue ON taskbroker_action(queue_name, position);
                CREATE TABLE taskbroker_sequence (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
                INSERT INTO taskbroker_sequence (id, value) VALUES (1, 0);
                """)
        }
        // The completion log: a succeeded action is logged here (one append per outcome, on the
        // last pages of one small table) instead of deleted from `taskbroker_action` (three
        // B-trees, one page each per queue); `compact(in:)` applies the log in bulk. Every read
        // treats a logged revision as deleted.
        migrator.registerMigration("taskbroker-v2-completion-log") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_done (
                    id INTEGER PRIMARY KEY,
                    revision INTEGER NOT NULL,
                    collection TEXT NOT NULL,
                    key TEXT NOT NULL
                );
                """)
        }
        // The log holds only revisions, as its rowid: a commit writes few, small log pages; a read
        // skips logged revisions through the log's own B-tree (no temporary index of the whole log
        // per statement); a re-save or delete finds a logged revision without a scan. Compaction
        // finds the logged rows through an index on `revision` (appended to at save: revisions
        // only grow).
        migrator.registerMigration("taskbroker-v3-completion-log-by-revision") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_done_by_revision (revision INTEGER PRIMARY KEY);
                INSERT OR IGNORE INTO taskbroker_done_by_revision (revision) SELECT revision FROM taskbroker_done;
                CREATE UNIQUE INDEX taskbroker_action_revision ON taskbroker_action(revision);
                DROP TABLE taskbroker_done;
                ALTER TABLE taskbroker_done_by_revision RENAME TO taskbroker_done;
                """)
        }
        return migrator
    }

    // MARK: - TaskStorage

    func save(_ tasks: [NewTask]) async throws -> [StoredTask] {
        guard !tasks.isEmpty else { return [] }
        return try await Self.run("save \(tasks.count) action(s)") {
            try await pool.write { db in try Self.save(tasks, in: db) }
        }
    }

    func delete(key: String, collection: String) async throws -> StoredTask? {
        try await Self.run("delete action \(collection)/\(key)") {
            try await pool.write { db in try Self.delete(key: key, collection: collection, in: db) }
        }
    }

    func queueNames() async throws -> [String] {
        try await Self.run("list queues") {
            try await pool.read { db in
                try String.fetchAll(
                    db,
                    // Without logged completions the index alone answers.
                    sql: try Self.hasLoggedCompletions(db)
                        ? "SELECT DISTINCT queue_name FROM taskbroker_action WHERE \(Self.isLive) ORDER BY queue_name"
                        : "SELECT DISTINCT queue_name FROM taskbroker_action ORDER BY queue_name"
                )
            }
        }
    }

    func tasks(inQueue queueName: String) async throws -> [StoredTask] {
        try await Self.run("read queue \(queueName)") {
            try await pool.read { db in
                // A cursor reads each row straight from SQLite's buffers: no copy of every row first.
                let rows = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT \(Self.selectedColumns) FROM taskbroker_action WHERE queue_name = ? AND \(Self.isLive)
                        ORDER BY position
                        """,
                    arguments: [queueName]
                )
                var tasks: [StoredTask] = []
                while let row = try rows.next() {
                    tasks.append(Self.task(from: row))
                }
                return tasks
            }
        }
    }

    /// The most queue names one statement of ``readQueues(_:_:)`` binds.
    static let queuesPerRead = 256

    /// Reads the stored actions of many queues in a few statements (one per
    /// ``queuesPerRead`` names, in one read transaction) and hands each queue's actions, in
    /// position order, to `body` as soon as that queue is read. A queue with no stored action
    /// is not reported.
    ///
    /// ``tasks(inQueue:)`` per queue gives the same result, but each of its statements skips the
    /// logged completions on its own: at startup, with many queues and a long log, that is most
    /// of the loading time.
    func readQueues(_ queueNames: [String], _ body: @escaping @Sendable (String, [StoredTask]) -> Void) async throws {
        guard !queueNames.isEmpty else { return }
        try await Self.run("read \(queueNames.count) queue(s)") {
            try await pool.read { db in
                var start = 0
                while start < queueNames.count {
                    let names = queueNames[start..<min(start + Self.queuesPerRead, queueNames.count)]
                    start += names.count
                    let rows = try Row.fetchCursor(
                        db,
                        sql: """
                            SELECT \(Self.selectedColumns) FROM taskbroker_action
                            WHERE queue_name IN (\(Array(repeating: "?", count: names.count).joined(separator: ", ")))
                            AND \(Self.isLive)
                            ORDER BY queue_name, position
                            """,
                        arguments: StatementArguments(Array(names))
                    )
                    var current: (name: String, tasks: [StoredTask])?
                    while let row = try rows.next() {
                        let task = Self.task(from: row)
                        if let queue = current, queue.name != task.queueName {
                            body(queue.name, queue.tasks)
                            current = nil
                        }
                        if current == nil { current = (task.queueName, []) }
                        current?.tasks.append(task)
                    }
                    if let queue = current { body(queue.name, queue.tasks) }
                }
            }
        }
    }

    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [Bool] {
        // One process runs the brokers of an SQLite file, and the in-process claim registry
        // already keeps two brokers off one queue: there is nothing to lease. A head deleted
        // behind the broker's back (by another process) may still run once; its outcome is then
        // a no-op, because `finish` applies only to the stored revision.
        heads.map { _ in true }
    }

    func finish(_ outcomes: [TaskOutcome], owner: String) async throws {
        guard !outcomes.isEmpty else { return }
        try await Self.run("store \(outcomes.count) outcome(s)") {
            try await commit(outcomes)
        }
    }

    /// `finish` for a dedicated committer thread: blocks the calling thread, no executor hops.
    func finishBlocking(_ outcomes: [TaskOutcome]) throws {
        guard !outcomes.isEmpty else { return }
        do {
            try commitBlocking(outcomes)
        } catch {
            throw TaskBrokerError(
                code: .storageFailed,
                message: "Could not store \(outcomes.count) outcome(s) in the task database; the operation was not applied.",
                underlying: error
            )
        }
    }

    /// How many logged completions trigger a compaction (applied in the same transaction).
    /// A long log costs reads nothing (they skip it by revision); a short one makes compactions
    /// frequent, and each rewrites the pages of the rows it deletes: 16,384 measured best in the
    /// burn-down benchmark (4,096 gave about 15% less).
    static let compactionThreshold = 16_384

    private func commit(_ outcomes: [TaskOutcome]) async throws {
        let known = loggedCompletions.withLock { $0 }
        do {
            let logged = try await pool.write { db in try Self.finish(outcomes, logged: known, in: db) }
            loggedCompletions.withLock { $0 = logged }
        } catch {
            loggedCompletions.withLock { $0 = nil }
            throw error
        }
    }

    private func commitBlocking(_ outcomes: [TaskOutcome]) throws {
        let known = loggedCompletions.withLock { $0 }
        do {
            let logged = try pool.write { db in try Self.finish(outcomes, logged: known, in: db) }
            loggedCompletions.withLock { $0 = logged }
        } catch {
            loggedCompletions.withLock { $0 = nil }
            throw error
        }
    }

    /// Stores outcomes, compacting the log once it is long.
    ///
    /// - Parameters:
    ///   - logged: How many completions the log held before, if known.
    /// - Returns: How many it holds after.
    static func finish(_ outcomes: [TaskOutcome], logged: Int?, in db: Database) throws -> Int {
        // A success appends to the completion log: whether the revision is still stored does not
        // matter (a logged revision that is gone or replaced is simply never read). Successes go
        // in multi-row INSERTs of up to `logChunk` rows: one statement run per chunk.
        var completed: [StoredTask] = []
        completed.reserveCapacity(outcomes.count)
        let fail = try db.cachedStatement(sql: """
            UPDATE taskbroker_action SET attempts = attempts + 1, pause_kind = ?, pause_until = ?
            WHERE collection = ? AND key = ? AND revision = ?
            """)
        for outcome in outcomes {
            switch outcome {
            case .completed(let task):
                completed.append(task)
            case .failed(let task, let pause):
                let (kind, until) = columns(for: pause)
                try fail.execute(arguments: [kind, until, task.collection, task.key, task.revision])
            }
        }
        var count = try logged ?? Int.fetchOne(db, sql: "SELECT count(*) FROM taskbroker_done") ?? 0
        var start = 0
        while start < completed.count {
            let end = min(start + logChunk, completed.count)
            let statement = try db.cachedStatement(sql: logSQL(rows: end - start))
            var values: [(any DatabaseValueConvertible)?] = []
            values.reserveCapacity(end - start)
            for task in completed[start..<end] {
                values.append(task.revision)
            }
            statement.setUncheckedArguments(StatementArguments(values))
            try statement.execute()
            count += db.changesCount
            start = end
        }
        guard count >= compactionThreshold else { return count }
        try compact(in: db)
        return 0
    }

    /// The most rows one INSERT into the completion log carries.
    static let logChunk = 64

    /// `INSERT OR IGNORE INTO taskbroker_done (revision) VALUES (?), …` with `rows` rows (a
    /// revision logged twice is logged once).
    static func logSQL(rows: Int) -> String {
        "INSERT OR IGNORE INTO taskbroker_done (revision) VALUES "
            + Array(repeating: "(?)", count: rows).joined(separator: ", ")
    }

    func resume(queues queueNames: [String]) async throws -> [StoredTask] {
        guard !queueNames.isEmpty else { return [] }
        return try await Self.run("resume \(queueNames.count) queue(s)") {
            try await pool.write { db in try Self.resume(queueNames, in: db) }
        }
    }

    func purge(queue queueName: String) async throws -> Int {
        try await Self.run("purge queue \(queueName)") {
            try await pool.write { db in
                let live = try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM taskbroker_action WHERE queue_name = ? AND \(Self.isLive)", arguments: [queueName]
                ) ?? 0
                try db.execute(sql: "DELETE FROM taskbroker_action WHERE queue_name = ?", arguments: [queueName])
                return live
            }
        }
    }

    func snapshot() async throws -> [TaskQueueSnapshot] {
        try await Self.run("read the queues' state") {
            try await pool.read { db in
                var snapshots: [String: TaskQueueSnapshot] = [:]
                var order: [String] = []
                for row in try Row.fetchAll(db, sql: """
                    WITH live AS (SELECT * FROM taskbroker_action WHERE \(Self.isLive))
                    SELECT a.queue_name AS queue_name, counts.pending AS pending, a.attempts AS attempts
                    FROM (SELECT queue_name, count(*) AS pending, min(position) AS head
                          FROM live GROUP BY queue_name) AS counts
                    JOIN live a ON a.queue_name = counts.queue_name AND a.position = counts.head
                    ORDER BY a.queue_name
                    """) {
                    let name: String = row["queue_name"]
                    order.append(name)
                    snapshots[name] = TaskQueueSnapshot(name: name, pending: row["pending"], attempts: row["attempts"])
                }
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT \(Self.selectedColumns) FROM taskbroker_action WHERE pause_kind <> 0 AND \(Self.isLive)
                        ORDER BY queue_name, position
                        """
                ) {
                    let task = Self.task(from: row)
                    snapshots[task.queueName]?.pause = task.pause
                    snapshots[task.queueName]?.attempts = task.attempts
                }
                return order.compactMap { snapshots[$0] }
            }
        }
    }

    /// Applies the completion log: deletes the logged revisions that are still stored (found
    /// through the `revision` index, in revision order), then empties the log.
    static func compact(in db: Database) throws {
        try db.execute(sql: """
            DELETE FROM taskbroker_action WHERE revision IN (SELECT revision FROM taskbroker_done);
            DELETE FROM taskbroker_done;
            """)
    }

    /// Whether the completion log has entries (reads may then skip the filter).
    static func hasLoggedCompletions(_ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM taskbroker_done)") ?? true
    }

    /// The condition of a stored, not yet completed row of `taskbroker_action`.
    static let isLive = "revision NOT IN (SELECT revision FROM taskbroker_done)"

    // MARK: - Statements shared with TaskTransaction

    static func save(_ tasks: [NewTask], in db: Database) throws -> [StoredTask] {
        var sequence = try Int64.fetchOne(db, sql: "SELECT value FROM taskbroker_sequence WHERE id = 1") ?? 0
        var stored: [StoredTask] = []
        stored.reserveCapacity(tasks.count)
        let statement = try db.cachedStatement(sql: """
            INSERT INTO taskbroker_action (collection, key, queue_name, position, revision, payload)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (collection, key) DO UPDATE SET
                queue_name = excluded.queue_name, revision = excluded.revision, payload = excluded.payload,
                attempts = 0, pause_kind = 0, pause_until = NULL,
                position = CASE WHEN EXISTS (SELECT 1 FROM taskbroker_done d WHERE d.revision = taskbroker_action.revision)
                    THEN excluded.position ELSE taskbroker_action.position END
            RETURNING position
            """)
        for task in tasks {
            sequence += 1
            let position = try Int64.fetchOne(
                statement,
                arguments: [task.collection, task.key, task.queueName, sequence, sequence, task.payload]
            ) ?? sequence
            stored.append(StoredTask(
                key: task.key, collection: task.collection, queueName: task.queueName,
                payload: task.payload, position: position, revision: sequence
            ))
        }
        try db.execute(sql: "UPDATE taskbroker_sequence SET value = ? WHERE id = 1", arguments: [sequence])
        return stored
    }

    static func delete(key: String, collection: String, in db: Database) throws -> StoredTask? {
        guard let deleted = try Row.fetchOne(
            db,
            sql: "DELETE FROM taskbroker_action WHERE collection = ? AND key = ? RETURNING \(selectedColumns)",
            arguments: [collection, key]
        ).map(task(from:)) else { return nil }
        // A completed revision was already gone for every reader.
        let completed = try Bool.fetchOne(
            db, sql: "SELECT EXISTS (SELECT 1 FROM taskbroker_done WHERE revision = ?)", arguments: [deleted.revision]
        ) ?? false
        return completed ? nil : deleted
    }

    static func resume(_ queueNames: [String], in db: Database) throws -> [StoredTask] {
        var resumed: [StoredTask] = []
        for name in queueNames {
            resumed += try Row.fetchAll(
                db,
                sql: """
                    UPDATE taskbroker_action SET pause_kind = 0, pause_until = NULL
                    WHERE queue_name = ? AND pause_kind <> 0 AND \(isLive) RETURNING \(selectedColumns)
                    """,
                arguments: [name]
            ).map(task(from:))
        }
        return resumed
    }

    /// The columns `task(from:)` reads, in its order.
    static let selectedColumns = "key, collection, queue_name, payload, position, revision, attempts, pause_kind, pause_until"

    static func task(from row: Row) -> StoredTask {
        let kind: Int = row[7]
        let until: Double? = row[8]
        let pause: TaskPause?
        switch kind {
        case 1: pause = .until(Date(timeIntervalSince1970: until ?? 0))
        case 2: pause = .untilRestart
        default: pause = nil
        }
        return StoredTask(
            key: row[0], collection: row[1], queueName: row[2], payload: row[3],
            position: row[4], revision: row[5], attempts: row[6], pause: pause
        )
    }

    static func columns(for pause: TaskPause?) -> (Int, Double?) {
        switch pause {
        case nil: (0, nil)
        case .until(let date): (1, date.timeIntervalSince1970)
        case .untilRestart: (2, nil)
        }
    }

    static func run<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as TaskBrokerError {
            throw error
        } catch {
            throw TaskBrokerError(
                code: .storageFailed,
                message: "Could not \(what) in the task database; the operation was not applied.",
                underlying: error
            )
        }
    }
}

