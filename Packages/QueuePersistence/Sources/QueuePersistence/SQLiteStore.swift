import Foundation
public import GRDB
import GRDBSQLite

/// How a ``SQLiteStore`` opens its file: durability, locking and whether a missing file is created.
public struct SQLiteDatabaseOptions: Sendable, Hashable {
    /// SQLite's `synchronous` setting for the WAL file: how hard a commit works to survive a power loss.
    public enum Synchronous: Sendable, Hashable {
        /// `PRAGMA synchronous = FULL`: every commit is flushed to disk before it returns; it
        /// survives `kill -9` and power loss. The default.
        case full
        /// `PRAGMA synchronous = NORMAL`: commits survive `kill -9`, but the last ones may be
        /// lost on power loss (the log is flushed only at checkpoints).
        case normal
        /// `PRAGMA synchronous = OFF`: no flush at all; for tests and throw-away data only.
        case off

        /// The value for `PRAGMA synchronous`.
        public var pragmaValue: String {
            switch self {
            case .full: "FULL"
            case .normal: "NORMAL"
            case .off: "OFF"
            }
        }
    }

    /// How durable a commit is. Defaults to ``Synchronous/full``.
    public var synchronous: Synchronous
    /// How long a write waits for another process's lock before failing. Defaults to 5 s. SQLite
    /// counts it in milliseconds in an `Int32`: anything past about 24 days counts as that, and a
    /// negative value as zero (also when set after the options were made).
    public var busyTimeout: Duration {
        didSet { busyTimeout = Self.clamped(busyTimeout) }
    }
    /// Whether a missing file is created (the default). When `false`, opening a missing file
    /// fails with ``PersistenceError/Code/databaseNotFound``.
    public var createsMissingFile: Bool
    /// Whether the file's folder is created when missing. Defaults to `false`: the folder must exist.
    public var createsDirectory: Bool
    /// The label of GRDB's connections and dispatch queues (shown in debuggers and crash logs).
    public var label: String
    /// Whether the file is opened for reading only (`false` by default): nothing is written,
    /// not even a migration; a missing file is ``PersistenceError/Code/databaseNotFound``, and a
    /// file whose schema is older than this release's is refused (a read-write open migrates it).
    public var readOnly = false

    /// Creates options; every field has a default.
    ///
    /// - Parameters:
    ///   - synchronous: How durable a commit is; `.full` by default.
    ///   - busyTimeout: How long a write waits for another process's lock; 5 s by default. SQLite
    ///     counts it in milliseconds in an `Int32`: anything past about 24 days counts as that, and
    ///     a negative value as zero.
    ///   - createsMissingFile: Whether a missing file is created; `true` by default.
    ///   - createsDirectory: Whether a missing folder is created; `false` by default.
    ///   - label: The label of GRDB's connections.
    public init(
        synchronous: Synchronous = .full,
        busyTimeout: Duration = .seconds(5),
        createsMissingFile: Bool = true,
        createsDirectory: Bool = false,
        label: String = "QueueKit"
    ) {
        self.synchronous = synchronous
        self.busyTimeout = Self.clamped(busyTimeout)
        self.createsMissingFile = createsMissingFile
        self.createsDirectory = createsDirectory
        self.label = label
    }

    /// SQLite takes the timeout as an `Int32` of milliseconds (GRDB converts it with a trapping
    /// conversion): clamped, so that no value traps.
    private static func clamped(_ timeout: Duration) -> Duration {
        min(max(timeout, .zero), .milliseconds(Int64(Int32.max)))
    }
}

/// The schema a library keeps in a ``SQLiteStore`` file: its GRDB migrations, the prefix that
/// marks them as its own, and the version it understands.
///
/// Several libraries (and the application's own tables) may share one file: only migrations
/// whose identifier starts with ``migrationPrefix`` are this schema's. A file on which such a
/// migration is recorded that ``migrator`` does not know — or whose recorded version is above
/// ``version`` — was written by a newer release and is refused with
/// ``PersistenceError/Code/incompatibleSchema``.
public struct SQLiteSchema: Sendable {
    /// The library's name, as the messages of errors say it (`"TaskBroker"`).
    public var owner: String
    /// The library's migrations. Add migrations; never edit a shipped one.
    public var migrator: DatabaseMigrator
    /// The prefix of every migration identifier of this schema (`"taskbroker-"`).
    public var migrationPrefix: String
    /// The schema version this release reads and writes.
    public var version: Int
    /// Reads the version the file records, for libraries that store one in a table of their own;
    /// `nil` when the file records none. Runs before the migrations.
    public var recordedVersion: (@Sendable (Database) throws -> Int?)?

    /// Creates a schema description.
    ///
    /// - Parameters:
    ///   - owner: The library's name, used in error messages.
    ///   - migrator: The library's migrations.
    ///   - migrationPrefix: The prefix of every identifier in `migrator`.
    ///   - version: The schema version this release understands.
    ///   - recordedVersion: Reads the version stored in the file, if the library stores one.
    public init(
        owner: String,
        migrator: DatabaseMigrator,
        migrationPrefix: String,
        version: Int,
        recordedVersion: (@Sendable (Database) throws -> Int?)? = nil
    ) {
        self.owner = owner
        self.migrator = migrator
        self.migrationPrefix = migrationPrefix
        self.version = version
        self.recordedVersion = recordedVersion
    }
}

/// A SQLite file opened the way every QueueKit store opens one: a GRDB `DatabasePool` in WAL
/// mode with the chosen `synchronous` level and busy timeout, its schema checked and migrated,
/// and SQLite's errors turned into ``PersistenceError``s that say what to do.
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// migrator.registerMigration("myapp-v1") { db in try db.execute(sql: "CREATE TABLE item (id TEXT PRIMARY KEY)") }
/// let store = try SQLiteStore(
///     path: "/var/lib/app/items.sqlite",
///     schema: SQLiteSchema(owner: "MyApp", migrator: migrator, migrationPrefix: "myapp-", version: 1)
/// )
/// try store.pool.write { db in try db.execute(sql: "INSERT INTO item VALUES ('a')") }
/// ```
///
/// `synchronous` is set on the writer connection after GRDB has switched the file to WAL
/// (GRDB itself sets `NORMAL` at that moment, so a `prepareDatabase` setting would be lost).
public struct SQLiteStore: Sendable {
    /// What was being done with the file when an error happened; it picks the error's code and wording.
    public enum Operation: Sendable, Hashable {
        /// Opening the file (``PersistenceError/Code/storageUnavailable``).
        case open
        /// Checking or migrating the schema (``PersistenceError/Code/storageUnavailable``).
        case migrate
        /// Reading (``PersistenceError/Code/readFailed``).
        case read
        /// Writing (``PersistenceError/Code/writeFailed``).
        case write

        var pastParticiple: String {
            switch self {
            case .open: "opened"
            case .migrate: "migrated"
            case .read: "read"
            case .write: "written"
            }
        }
    }

    /// The file's path, as given.
    public let path: String
    /// The connection pool: one writer, concurrent readers.
    public let pool: DatabasePool
    /// The schema this store was opened with.
    public let schema: SQLiteSchema

    /// Opens (or creates) the SQLite file at `path`, sets it up and brings `schema` up to date.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - options: Durability, locking and creation options.
    ///   - schema: The library's migrations and version.
    /// - Throws: ``PersistenceError`` with code `.databaseNotFound` (missing file and
    ///   `createsMissingFile == false`), `.corruptDatabase` (not a SQLite database, or damaged),
    ///   `.incompatibleSchema` (written by a newer release), or `.storageUnavailable` (also when
    ///   the file is read-only for this process: it is not opened read-only).
    public init(path: String, options: SQLiteDatabaseOptions = .init(), schema: SQLiteSchema) throws(PersistenceError) {
        self.path = path
        self.schema = schema
        let exists = FileManager.default.fileExists(atPath: path)
        if !exists, !options.createsMissingFile {
            throw PersistenceError(
                code: .databaseNotFound,
                message: "There is no database file at \(path), and this call opens existing files only; "
                    + "check the path, or open it with creation allowed.",
                path: path
            )
        }
        if options.readOnly {
            guard exists else {
                throw PersistenceError(
                    code: .databaseNotFound,
                    message: "There is no database file at \(path) to open read-only; check the path.",
                    path: path
                )
            }
        }
        var configuration = Configuration()
        configuration.label = options.label
        configuration.readonly = options.readOnly
        configuration.busyMode = .timeout(
            Double(options.busyTimeout.components.seconds) + Double(options.busyTimeout.components.attoseconds) / 1e18
        )
        // SQLite opens a file it may not write (its mode, its owner, a read-only mount) read-only
        // without a word. The pool's writer connection would then fail every write for as long as
        // it lives, even once the file is writable again, and its first read would create the
        // `-wal` and `-shm` files with the database file's read-only mode, which keep the file
        // unwritable after the fault is gone. So the writer is refused before it reads anything.
        configuration.prepareDatabase { db in
            guard !db.configuration.readonly, let connection = db.sqliteConnection,
                sqlite3_db_readonly(connection, "main") == 1
            else { return }
            throw PersistenceError(
                code: .storageUnavailable,
                message: "The database \(path) is read-only for this process (its permissions or owner, or a "
                    + "read-only file system), so it cannot be written; make the file and its folder writable, then "
                    + "open it again.",
                path: path
            )
        }
        let pool: DatabasePool
        do {
            if options.createsDirectory {
                let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } else if !exists {
                let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
                var isDirectory: ObjCBool = false
                if !FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) || !isDirectory.boolValue {
                    throw PersistenceError(
                        code: .storageUnavailable,
                        message: "Cannot create the database \(path): its folder \(directory) does not exist; create it first.",
                        path: path
                    )
                }
            }
            pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB sets synchronous=NORMAL when it turns WAL on; set ours afterwards on the one
            // writer connection (readers never commit). A read-only pool has no writer.
            if !options.readOnly {
                let pragma = options.synchronous.pragmaValue
                try pool.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA synchronous = \(pragma)")
                }
            }
        } catch {
            throw Self.translate(error, path: path, owner: schema.owner, during: .open)
        }
        self.pool = pool
        try migrate(readOnly: options.readOnly)
    }

    /// Refuses a file written by a newer release, then applies the missing migrations (read-only:
    /// refuses a file that misses some).
    private func migrate(readOnly: Bool) throws(PersistenceError) {
        let schema = self.schema
        let migrator = schema.migrator
        do {
            let (unknown, recorded) = try pool.read { db -> ([String], Int?) in
                let applied = try migrator.appliedIdentifiers(db)
                let known = Set(migrator.migrations)
                let unknown = applied.filter { $0.hasPrefix(schema.migrationPrefix) && !known.contains($0) }.sorted()
                return (unknown, try schema.recordedVersion?(db))
            }
            if !unknown.isEmpty || (recorded ?? 0) > schema.version {
                throw PersistenceError(
                    code: .incompatibleSchema,
                    message: "The database was written by a newer \(schema.owner) (schema version "
                        + "\(recorded.map(String.init) ?? "?"), migrations \(unknown)); this version reads schema "
                        + "\(schema.version). Upgrade \(schema.owner) or use another file.",
                    path: path
                )
            }
            if readOnly {
                guard try pool.read({ db in try migrator.hasCompletedMigrations(db) }) else {
                    throw PersistenceError(
                        code: .incompatibleSchema,
                        message: "The database \(path) has an older \(schema.owner) schema than this version's (\(schema.version)), "
                            + "and opened read-only it cannot be migrated; open it read-write once (any worker does), then again.",
                        path: path
                    )
                }
                return
            }
            try migrator.migrate(pool)
        } catch let error as PersistenceError {
            throw error
        } catch {
            throw translate(error, during: .migrate)
        }
    }

    /// Turns an error raised while using this store into a ``PersistenceError`` a user can act on.
    ///
    /// - Parameters:
    ///   - error: A GRDB `DatabaseError`, a POSIX error, or a ``PersistenceError`` (returned unchanged).
    ///   - operation: What was being done.
    /// - Returns: `.corruptDatabase` for SQLite's "not a database" and "corrupt" results, otherwise
    ///   the code that `operation` implies.
    public func translate(_ error: any Error, during operation: Operation) -> PersistenceError {
        Self.translate(error, path: path, owner: schema.owner, during: operation)
    }

    /// Turns an error raised while using the SQLite file at `path` into a ``PersistenceError``.
    ///
    /// - Parameters:
    ///   - error: A GRDB `DatabaseError`, a POSIX error, or a ``PersistenceError`` (returned unchanged).
    ///   - path: The database file.
    ///   - owner: The library that uses the file, as the message says it.
    ///   - operation: What was being done.
    /// - Returns: `.corruptDatabase` for SQLite's "not a database" and "corrupt" results, otherwise
    ///   the code that `operation` implies.
    public static func translate(_ error: any Error, path: String, owner: String, during operation: Operation) -> PersistenceError {
        if let error = error as? PersistenceError { return error }
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_NOTADB, .SQLITE_CORRUPT:
                return PersistenceError(
                    code: .corruptDatabase,
                    message: "The file \(path) is not a QueueKit SQLite database or is corrupt, so it could not be "
                        + "\(operation.pastParticiple); restore it from a backup or move it aside.",
                    path: path,
                    underlying: error
                )
            default:
                break
            }
        }
        let code: PersistenceError.Code
        switch operation {
        case .write: code = .writeFailed
        case .read: code = .readFailed
        case .open, .migrate: code = .storageUnavailable
        }
        return PersistenceError(
            code: code,
            message: "The \(owner) database \(path) could not be \(operation.pastParticiple); check the path, free space and permissions.",
            path: path,
            underlying: error
        )
    }
}
