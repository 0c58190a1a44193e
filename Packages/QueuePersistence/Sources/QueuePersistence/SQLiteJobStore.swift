import Foundation
import GRDB
import Synchronization

/// One SQLite file shared by every ``SQLiteJobPersister`` of a process that opens it with
/// the same durability: one connection pool, one group-commit writer.
final class SQLiteJobStore: Sendable {
    enum Operation: Sendable {
        case upsert(queue: String, jobs: [(id: String, payload: Data)])
        /// Stores the jobs before every row of the file, `jobs[0]` lowest; ids are unique.
        case upsertFirst(queue: String, jobs: [(id: String, payload: Data)])
        case delete(queue: String, id: String)
        case clear(queue: String)
    }

    /// The schema this library writes. A file whose recorded version is higher was written by
    /// a newer QueuePersistence and is refused.
    static let schemaVersion = 1
    static let migrationPrefix = "QueuePersistence."
    static let jobTable = "queuePersistenceJob"
    static let metaTable = "queuePersistenceMeta"

    let path: String
    let pool: DatabasePool
    let writer: GroupCommitWriter<Operation>

    private struct Key: Hashable {
        let path: String
        let synchronous: SQLiteJobPersisterSynchronous
    }

    private struct WeakStore: Sendable {
        weak var store: SQLiteJobStore?
    }

    private static let stores = Mutex<[Key: WeakStore]>([:])

    /// The store of `path` in this process, opened (and migrated) on first use.
    static func shared(path: String, configuration: SQLiteJobPersisterConfiguration) throws(PersistenceError) -> SQLiteJobStore {
        let canonical = URL(fileURLWithPath: path).standardizedFileURL.path
        let key = Key(path: canonical, synchronous: configuration.synchronous)
        return try stores.withLock { stores throws(PersistenceError) in
            if let store = stores[key]?.store { return store }
            stores = stores.filter { $0.value.store != nil }
            let store = try SQLiteJobStore(path: canonical, configuration: configuration)
            stores[key] = WeakStore(store: store)
            return store
        }
    }

    private init(path: String, configuration: SQLiteJobPersisterConfiguration) throws(PersistenceError) {
        self.path = path
        let store = try SQLiteStore(
            path: path,
            options: SQLiteDatabaseOptions(
                synchronous: configuration.synchronous == .full ? .full : .normal,
                busyTimeout: configuration.busyTimeout,
                createsDirectory: true,
                label: "QueuePersistence"
            ),
            schema: Self.schema
        )
        let pool = store.pool
        self.pool = pool
        self.writer = GroupCommitWriter(maximumBatchSize: configuration.maximumBatchSize, retriesAlone: Self.retriesAlone) {
            operations throws(PersistenceError) in
            do {
                try pool.writeWithoutTransaction { db in
                    try db.inTransaction(.immediate) {
                        try Self.apply(operations, in: db)
                        return .commit
                    }
                }
            } catch {
                throw Self.translate(error, path: path, action: .write)
            }
        }
    }

    // MARK: - Schema

    /// The migrations, plus the version recorded in the meta table (a newer file is refused).
    static var schema: SQLiteSchema {
        SQLiteSchema(
            owner: "QueuePersistence",
            migrator: migrator,
            migrationPrefix: migrationPrefix,
            version: schemaVersion,
            recordedVersion: { db in
                guard try db.tableExists(metaTable) else { return nil }
                return try Int.fetchOne(db, sql: "SELECT value FROM \(metaTable) WHERE key = 'schemaVersion'")
            }
        )
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(migrationPrefix + "v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE \(jobTable) (
                        sequence INTEGER PRIMARY KEY,
                        queueName TEXT NOT NULL,
                        jobID TEXT NOT NULL,
                        payload BLOB NOT NULL,
                        UNIQUE (queueName, jobID)
                    );
                    CREATE INDEX \(jobTable)_order ON \(jobTable) (queueName, sequence);
                    CREATE TABLE \(metaTable) (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
                    INSERT INTO \(metaTable) (key, value) VALUES ('schemaVersion', 1);
                    """
            )
        }
        return migrator
    }

    // MARK: - Writing

    private static func apply(_ operations: [Operation], in db: Database) throws {
        for operation in operations {
            switch operation {
            case .upsert(let queue, let jobs):
                let statement = try db.cachedStatement(
                    sql: """
                        INSERT INTO \(jobTable) (queueName, jobID, payload) VALUES (?, ?, ?)
                        ON CONFLICT (queueName, jobID) DO UPDATE SET payload = excluded.payload
                        """
                )
                for job in jobs {
                    try statement.execute(arguments: [queue, job.id, job.payload])
                }
            case .upsertFirst(let queue, let jobs):
                // `sequence` is the rowid, shared by every queue of the file: one below the
                // lowest of the whole table is below this queue's lowest and taken by no row.
                // Inserted last job first, so that the batch keeps its order; a stored id is
                // moved (its row gets the new number) and replaced.
                let statement = try db.cachedStatement(
                    sql: """
                        INSERT INTO \(jobTable) (sequence, queueName, jobID, payload)
                        VALUES ((SELECT COALESCE(MIN(sequence), 1) FROM \(jobTable)) - 1, ?, ?, ?)
                        ON CONFLICT (queueName, jobID) DO UPDATE SET sequence = excluded.sequence, payload = excluded.payload
                        """
                )
                for job in jobs.reversed() {
                    try statement.execute(arguments: [queue, job.id, job.payload])
                }
            case .delete(let queue, let id):
                try db.cachedStatement(sql: "DELETE FROM \(jobTable) WHERE queueName = ? AND jobID = ?")
                    .execute(arguments: [queue, id])
            case .clear(let queue):
                try db.execute(sql: "DELETE FROM \(jobTable) WHERE queueName = ?", arguments: [queue])
            }
        }
    }

    /// Commits `operation` durably, sharing the commit with concurrent callers.
    func submit(_ operation: Operation) throws(PersistenceError) {
        try writer.submit(operation)
    }

    // MARK: - Reading

    /// One stored row of a queue.
    struct StoredRow: Sendable {
        let sequence: Int64
        let jobID: String
        let payload: [UInt8]
    }

    /// Hands `body` every row of `queue`, in order, `limit` rows at a time, all read from one
    /// snapshot of the file: a job that ``persistFirst`` moves below the rows already read
    /// while the pages are read is not missed (with one read per page it was). Each page is
    /// one short read of the snapshot's own connection, and `body` runs outside it: the job
    /// type's `init(from:)` is the user's code, and may use the database itself.
    func forEachPage(queue: String, limit: Int, _ body: ([StoredRow]) -> Void) throws(PersistenceError) {
        let snapshot: DatabaseSnapshot
        do {
            snapshot = try pool.makeSnapshot()
        } catch {
            throw Self.translate(error, path: path, action: .read)
        }
        var after = Int64.min
        while true {
            let page = try rows(queue: queue, after: after, limit: limit, from: snapshot)
            guard let last = page.last else { return }
            after = last.sequence
            body(page)
            if page.count < limit { return }
        }
    }

    /// Up to `limit` of the queue's rows after `sequence`, in order, in one short read of `reader`.
    private func rows(queue: String, after sequence: Int64, limit: Int, from reader: some DatabaseReader) throws(PersistenceError) -> [StoredRow] {
        do {
            return try reader.read { db in
                let rows = try Row.fetchCursor(
                    db,
                    sql: "SELECT sequence, jobID, payload FROM \(Self.jobTable) WHERE queueName = ? AND sequence > ? "
                        + "ORDER BY sequence LIMIT ?",
                    arguments: [queue, sequence, limit]
                )
                var page: [StoredRow] = []
                page.reserveCapacity(limit)
                while let row = try rows.next() {
                    // One copy, straight from SQLite's buffer.
                    let payload = try row.withUnsafeData(atIndex: 2) { data in data.map { [UInt8]($0) } ?? [] }
                    page.append(StoredRow(sequence: row[0], jobID: row[1], payload: payload))
                }
                return page
            }
        } catch {
            throw Self.translate(error, path: path, action: .read)
        }
    }

    /// The table corrupt rows are moved to: the job table's columns, created on first use.
    static let quarantineTable = "queuePersistenceQuarantine"

    /// Moves the rows with these sequence numbers to the quarantine table, in one transaction.
    func quarantine(sequences: [Int64]) throws(PersistenceError) {
        do {
            try pool.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE IF NOT EXISTS \(Self.quarantineTable) (
                            sequence INTEGER PRIMARY KEY,
                            queueName TEXT NOT NULL,
                            jobID TEXT NOT NULL,
                            payload BLOB NOT NULL
                        )
                        """
                )
                for sequence in sequences {
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO \(Self.quarantineTable) SELECT sequence, queueName, jobID, payload "
                            + "FROM \(Self.jobTable) WHERE sequence = ?",
                        arguments: [sequence]
                    )
                    try db.execute(sql: "DELETE FROM \(Self.jobTable) WHERE sequence = ?", arguments: [sequence])
                }
            }
        } catch {
            throw Self.translate(error, path: path, action: .write)
        }
    }

    /// Turns a GRDB or POSIX error into a ``PersistenceError`` a user can act on.
    /// Whether a batch commit that failed with `error` may work for its callers one at a time:
    /// not when SQLite refused the transaction whatever it held (another connection's lock, a
    /// full disk, an I/O error, a read-only or damaged file).
    static func retriesAlone(_ error: PersistenceError) -> Bool {
        guard let database = error.underlying as? DatabaseError else { return true }
        switch database.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_FULL, .SQLITE_IOERR, .SQLITE_READONLY, .SQLITE_CANTOPEN,
            .SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_NOMEM, .SQLITE_PERM:
            return false
        default:
            return true
        }
    }

    static func translate(_ error: any Error, path: String, action: SQLiteStore.Operation) -> PersistenceError {
        SQLiteStore.translate(error, path: path, owner: "QueuePersistence", during: action)
    }
}
