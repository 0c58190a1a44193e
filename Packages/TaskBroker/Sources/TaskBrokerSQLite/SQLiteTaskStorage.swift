import Foundation
import GRDB
import QueuePersistence
import Synchronization
import TaskBrokerCore

/// The embedded backend: one SQLite file in WAL mode, opened through GRDB.
///
/// All writes of one call are one transaction. `synchronous=FULL` (the default) makes every
/// commit durable before the call returns.
final class SQLiteTaskStorage: TaskStorage, BatchQueueReading, BlockingOutcomeStore, UnclaimedHeads {
    let pool: DatabasePool
    let path: String
    /// What this process's stores of the file share: its broker locks, and the hub to which
    /// saves, deletes, resumes and purges are announced from their commits (`write(_:announcing:_:)`).
    let file: SQLiteFile
    var hub: DatabaseHub { file.hub }
    /// How many completions the log holds, as of the last committed `finish`; `nil` when unknown
    /// (at open, and after a failed write), then counted again. Only `finish` adds to the log.
    let loggedCompletions = Mutex<Int?>(nil)

    private init(pool: DatabasePool, path: String) {
        self.pool = pool
        self.path = path
        self.file = SQLiteFile.shared(forPath: path)
    }

    /// Opens the file through QueuePersistence's `SQLiteStore` (WAL, `synchronous` on the
    /// writer, busy timeout, migrations, refusal of newer files, clear errors for corrupt ones).
    static func open(path: String, configuration: TaskDatabase.Configuration) async throws -> SQLiteTaskStorage {
        var options = SQLiteDatabaseOptions(
            synchronous: configuration.synchronous.storeValue,
            busyTimeout: Duration(timeInterval: configuration.busyTimeout),
            createsMissingFile: configuration.createsMissingFile,
            label: "TaskBroker"
        )
        options.readOnly = configuration.readOnly
        do {
            let store = try SQLiteStore(path: path, options: options, schema: schema)
            return SQLiteTaskStorage(pool: store.pool, path: path)
        } catch {
            throw TaskBrokerError(error)
        }
    }

    // MARK: - TaskStorage

    func save(_ tasks: [NewTask]) async throws -> [StoredTask] {
        guard !tasks.isEmpty else { return [] }
        return try await write("save \(tasks.count) action(s)", announcing: { $0.map { .saved($0) } }) { db in
            try Self.save(tasks, in: db)
        }
    }

    func delete(key: String, collection: String) async throws -> StoredTask? {
        try await write("delete action \(collection)/\(key)", announcing: { deleted in deleted.map { [.deleted($0)] } ?? [] }) { db in
            try Self.delete(key: key, collection: collection, in: db)
        }
    }

    /// Runs one write transaction and announces what it changed to this process's brokers from
    /// the commit itself: GRDB calls the hook on the writer's queue, before the next write can
    /// begin, so brokers hear of commits in the order they were made. Announced after the write
    /// returned, from whichever thread resumed its caller, two commits could be heard the other
    /// way round: a purge heard after a save committed later dropped the saved action (stored,
    /// unrun until the queue was read again), and a save heard after the delete of that very
    /// revision ran the cancelled action.
    ///
    /// - Parameters:
    ///   - what: The operation, for the error message.
    ///   - changes: What the result means to the brokers.
    ///   - body: The statements.
    /// - Returns: What `body` returns.
    /// - Throws: `TaskBrokerError` with code `.storageFailed` (nothing is announced then).
    func write<T: Sendable>(
        _ what: String,
        announcing changes: @escaping @Sendable (T) -> [TaskChange],
        _ body: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        let hub = self.hub
        return try await Self.run(what) {
            try await pool.write { db in
                let value = try body(db)
                let announced = changes(value)
                db.afterNextTransaction { _ in hub.publish(announced) }
                return value
            }
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
                        SELECT \(Self.selectedColumns) FROM taskbroker_action WHERE queue_name = ? AND \(Self.isReady)
                        ORDER BY position
                        """,
                    arguments: [queueName]
                )
                var tasks: [StoredTask] = []
                while let row = try rows.next() {
                    tasks.append(try Self.task(from: row))
                }
                return tasks
            }
        }
    }

    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [TaskClaimResult] {
        // One process runs the brokers of an SQLite file, and the in-process claim registry
        // already keeps two brokers off one queue: there is nothing to lease. A head deleted
        // behind the broker's back (by another process) may still run once; its outcome is then
        // a no-op, because `finish` applies only to the stored revision.
        heads.map { _ in .granted() }
    }

    /// Reports the failures whose action is no longer stored as it ran (`outdated`): deleted or
    /// replaced by another process, whose change may reach this process's brokers only after
    /// the outcome (it comes through the file's change journal). Completions are not checked: a
    /// logged revision that is gone is simply never read.
    @discardableResult
    func finish(_ outcomes: [TaskOutcome], owner: String) async throws -> TaskFinishReport {
        guard !outcomes.isEmpty else { return TaskFinishReport() }
        let outdated = try await Self.run("store \(outcomes.count) outcome(s)") {
            try await commit(outcomes)
        }
        hub.signalCompletions()
        return TaskFinishReport(outdated: outdated)
    }

    /// `finish` for a dedicated committer thread: blocks the calling thread, no executor hops.
    func finishBlocking(_ outcomes: [TaskOutcome]) throws -> TaskFinishReport {
        guard !outcomes.isEmpty else { return TaskFinishReport() }
        do {
            let outdated = try commitBlocking(outcomes)
            hub.signalCompletions()
            return TaskFinishReport(outdated: outdated)
        } catch {
            throw TaskBrokerError(
                code: .storageFailed,
                message: "Could not store \(outcomes.count) outcome(s) in the task database; the operation was not applied.",
                underlying: error
            )
        }
    }

    func resume(queues queueNames: [String]) async throws -> [StoredTask] {
        guard !queueNames.isEmpty else { return [] }
        return try await write("resume \(queueNames.count) queue(s)", announcing: { [.resumed(queueNames: queueNames, tasks: $0)] }) { db in
            try Self.resume(queueNames, in: db)
        }
    }

    func purge(queue queueName: String) async throws -> Int {
        try await write("purge queue \(queueName)", announcing: { _ in [.purged(queueName: queueName)] }) { db in
            let live = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM taskbroker_action WHERE queue_name = ? AND \(Self.isReady)", arguments: [queueName]
            ) ?? 0
            try db.execute(sql: "DELETE FROM taskbroker_action WHERE queue_name = ?", arguments: [queueName])
            try Self.journal([queueName], in: db)
            return live
        }
    }

    func snapshot() async throws -> [TaskQueueSnapshot] {
        try await Self.run("read the queues' state") {
            try await pool.read { db in
                var snapshots: [String: TaskQueueSnapshot] = [:]
                var order: [String] = []
                for row in try Row.fetchAll(db, sql: """
                    WITH live AS (SELECT * FROM taskbroker_action WHERE \(Self.isReady))
                    SELECT a.queue_name AS queue_name, counts.pending AS pending, a.attempts AS attempts,
                           a.last_failure AS last_failure, a.failed_at AS failed_at, counts.oldest AS oldest
                    FROM (SELECT queue_name, count(*) AS pending, min(position) AS head, min(saved_at) AS oldest
                          FROM live GROUP BY queue_name) AS counts
                    JOIN live a ON a.queue_name = counts.queue_name AND a.position = counts.head
                    ORDER BY a.queue_name
                    """) {
                    // Throwing reads: a value of the wrong type is an error, not a trap (see task(from:)).
                    let name: String = try row.decode(forColumn: "queue_name")
                    order.append(name)
                    snapshots[name] = TaskQueueSnapshot(
                        name: name, pending: try row.decode(forColumn: "pending"), attempts: try row.decode(forColumn: "attempts"),
                        lastFailure: try Self.failure(
                            reason: try row.decode(forColumn: "last_failure"), at: try row.decode(forColumn: "failed_at")
                        ),
                        oldestSavedAt: (try row.decode(Double?.self, forColumn: "oldest")).map(Date.init(timeIntervalSince1970:))
                    )
                }
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT \(Self.selectedColumns) FROM taskbroker_action WHERE pause_kind <> 0 AND \(Self.isReady)
                        ORDER BY queue_name, position
                        """
                ) {
                    let task = try Self.task(from: row)
                    snapshots[task.queueName]?.pause = task.pause
                    snapshots[task.queueName]?.attempts = task.attempts
                    snapshots[task.queueName]?.lastFailure = task.lastFailure
                }
                for (name, count) in try Self.deadLetterCounts(in: db) {
                    if snapshots[name] == nil {
                        snapshots[name] = TaskQueueSnapshot(name: name, pending: 0)
                        order.append(name)
                    }
                    snapshots[name]?.deadLetters = count
                }
                return order.sorted().compactMap { snapshots[$0] }
            }
        }
    }

    // MARK: - Statements shared with TaskTransaction

    static func save(_ tasks: [NewTask], in db: Database) throws -> [StoredTask] {
        var sequence = try Int64.fetchOne(db, sql: "SELECT value FROM taskbroker_sequence WHERE id = 1") ?? 0
        let savedAt = Date().timeIntervalSince1970
        var stored: [StoredTask] = []
        stored.reserveCapacity(tasks.count)
        let statement = try db.cachedStatement(sql: """
            INSERT INTO taskbroker_action (collection, key, queue_name, position, revision, payload, not_before, priority, saved_at, trace_context)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (collection, key) DO UPDATE SET
                saved_at = CASE WHEN EXISTS (SELECT 1 FROM taskbroker_done d WHERE d.revision = taskbroker_action.revision)
                    THEN excluded.saved_at ELSE taskbroker_action.saved_at END,
                queue_name = excluded.queue_name, revision = excluded.revision, payload = excluded.payload,
                not_before = excluded.not_before, priority = excluded.priority, trace_context = excluded.trace_context, state = 0,
                attempts = 0, pause_kind = 0, pause_until = NULL, last_failure = NULL, failed_at = NULL,
                position = CASE WHEN EXISTS (SELECT 1 FROM taskbroker_done d WHERE d.revision = taskbroker_action.revision)
                    THEN excluded.position ELSE taskbroker_action.position END
            RETURNING position
            """)
        for task in tasks {
            guard sequence < Int64.max else { throw revisionsExhausted }
            sequence += 1
            let position = try Int64.fetchOne(
                statement,
                arguments: [
                    task.collection, task.key, task.queueName, sequence, sequence, task.payload,
                    task.notBefore?.timeIntervalSince1970, task.priority, savedAt, TaskTraceHeaders.encoded(task.traceContext),
                ]
            ) ?? sequence
            stored.append(StoredTask(
                key: task.key, collection: task.collection, queueName: task.queueName,
                payload: task.payload, position: position, revision: sequence,
                notBefore: task.notBefore, priority: task.priority, traceContext: task.traceContext
            ))
        }
        try db.execute(sql: "UPDATE taskbroker_sequence SET value = ? WHERE id = 1", arguments: [sequence])
        var seen: Set<String> = []
        var queues: [String] = []
        for task in tasks where seen.insert(task.queueName).inserted {
            queues.append(task.queueName)
        }
        try journal(queues, in: db)
        return stored
    }

    /// Saves the action unless a live row (ready or a dead letter, not a logged completion) has its
    /// key and collection: in one write transaction, which no other write (of any process) interleaves.
    static func saveIfAbsent(_ task: NewTask, in db: Database) throws -> StoredTask? {
        let stored = try Bool.fetchOne(
            db,
            sql: "SELECT EXISTS (SELECT 1 FROM taskbroker_action WHERE collection = ? AND key = ? AND \(isLive))",
            arguments: [task.collection, task.key]
        ) ?? false
        return stored ? nil : try save([task], in: db).first
    }

    func saveIfAbsent(_ task: NewTask) async throws -> StoredTask? {
        try await write("save action \(task.collection)/\(task.key) if absent", announcing: { $0.map { [.saved($0)] } ?? [] }) { db in
            try Self.saveIfAbsent(task, in: db)
        }
    }

    static func delete(key: String, collection: String, in db: Database) throws -> StoredTask? {
        guard let deleted = try Row.fetchOne(
            db,
            sql: "DELETE FROM taskbroker_action WHERE collection = ? AND key = ? RETURNING \(selectedColumns)",
            arguments: [collection, key]
        ).map(task(from:)) else { return nil }
        try journal([deleted.queueName], in: db)
        // A completed revision was already gone for every reader.
        let completed = try Bool.fetchOne(
            db, sql: "SELECT EXISTS (SELECT 1 FROM taskbroker_done WHERE revision = ?)", arguments: [deleted.revision]
        ) ?? false
        return completed ? nil : deleted
    }

    static func resume(_ queueNames: [String], in db: Database) throws -> [StoredTask] {
        var resumed: [StoredTask] = []
        try journal(queueNames, in: db)
        for name in queueNames {
            resumed += try Row.fetchAll(
                db,
                sql: """
                    UPDATE taskbroker_action SET pause_kind = 0, pause_until = NULL
                    WHERE queue_name = ? AND pause_kind <> 0 AND \(isReady) RETURNING \(selectedColumns)
                    """,
                arguments: [name]
            ).map(task(from:))
        }
        return resumed
    }

    static func run<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as TaskBrokerError {
            throw error
        } catch let error as CancellationError {
            // The caller was cancelled: said as such, not as a failure to retry.
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

