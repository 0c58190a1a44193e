public import Foundation
import GRDB
import QueuePersistence
public import TaskBrokerCore

// The embedded SQLite backend's entry points on `TaskDatabase`: `import TaskBroker` brings them.
extension TaskDatabase {
    /// Tunables of the SQLite backend.
    public struct Configuration: Sendable {
        /// SQLite's `synchronous` setting for the WAL file.
        public enum Synchronous: Sendable, Hashable {
            /// Every commit is on disk when it returns: survives power loss (the default).
            case full
            /// Commits survive a crash of the process but may be lost on power loss.
            case normal
            /// No fsync at all: for tests and throw-away data only.
            case off

            var storeValue: SQLiteDatabaseOptions.Synchronous {
                switch self {
                case .full: .full
                case .normal: .normal
                case .off: .off
                }
            }
        }

        /// How durable a commit is. Defaults to `Synchronous/full`.
        public var synchronous: Synchronous
        /// How long a write waits for another process's lock before failing, in seconds. Defaults
        /// to 5 s. Any value is accepted: NaN or negative counts as 0, infinity as about 31 years.
        /// A write that gives up is retried by the broker with `TaskQueueBroker/Configuration/storageRetryBackoff`.
        public var busyTimeout: TimeInterval
        /// Whether `TaskDatabase/sqlite(path:configuration:)` creates a missing file (the
        /// default). Set it to `false` to open an existing file only: a missing one fails with
        /// `TaskBrokerError/Code/databaseNotFound` and nothing is created (for tools that
        /// inspect a worker's file).
        public var createsMissingFile: Bool
        /// Whether the file is opened for reading only (`false` by default; for tools that inspect
        /// a worker's file): every write fails with `.storageFailed` and nothing is written, not
        /// even a migration. A missing file is `.databaseNotFound`; a file an older TaskBroker wrote
        /// is `.incompatibleSchema` until a read-write open migrates it.
        public var readOnly: Bool

        /// Creates a configuration; every field has a default.
        ///
        /// - Parameters:
        ///   - synchronous: How durable a commit is.
        ///   - busyTimeout: How long a write waits for another process's lock, in seconds.
        ///   - createsMissingFile: Whether a missing file is created; `false` opens existing files only.
        ///   - readOnly: Whether the file is opened for reading only.
        public init(synchronous: Synchronous = .full, busyTimeout: TimeInterval = 5, createsMissingFile: Bool = true, readOnly: Bool = false) {
            self.synchronous = synchronous
            self.busyTimeout = busyTimeout
            self.createsMissingFile = createsMissingFile
            self.readOnly = readOnly
        }
    }

    /// Opens (or creates) the SQLite file at `path` in WAL mode and brings its schema up to date.
    ///
    /// The file is opened through QueuePersistence's `SQLiteStore`, the plumbing all QueueKit
    /// SQLite stores share.
    ///
    /// - Parameters:
    ///   - path: The database file; its directory must exist.
    ///   - configuration: Durability, locking and creation tunables.
    /// - Returns: The database.
    /// - Throws: `TaskBrokerError` with code `.databaseNotFound` when the file is missing and
    ///   `configuration.createsMissingFile` is `false`, `.corruptDatabase` when the file is not a
    ///   QueueKit SQLite database or is corrupt, `.incompatibleSchema` when a newer TaskBroker wrote
    ///   it, `.storageFailed` when it cannot be opened or migrated otherwise (a missing folder, permissions).
    public static func sqlite(path: String, configuration: Configuration = .init()) async throws -> TaskDatabase {
        TaskDatabase(storage: try await SQLiteTaskStorage.open(path: path, configuration: configuration))
    }

    /// Runs `body` in one write transaction of the SQLite file: save and delete actions together
    /// with your own rows, committed together or not at all.
    ///
    /// ```swift
    /// try await database.write { tx in
    ///     try tx.db.execute(sql: "INSERT INTO message (id, body) VALUES (?, ?)", arguments: [id, body])
    ///     try tx.save(MessageSendAction(key: id, collection: "messages", queueName: "handler1-q"))
    /// }
    /// ```
    ///
    /// Change TaskBroker's own tables only through `tx`. Brokers wake after the commit.
    ///
    /// - Parameter body: Your transaction; throw to roll everything back.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws (unchanged), or `TaskBrokerError` with code `.storageFailed`,
    ///   or `.unsupported` when this database is not the SQLite backend.
    public func write<T: Sendable>(_ body: @escaping @Sendable (TaskTransaction) throws -> T) async throws -> T {
        guard let sqlite = storage as? SQLiteTaskStorage else {
            throw TaskBrokerError(
                code: .unsupported,
                message: "write(_:) with a TaskTransaction needs the SQLite backend. On PostgreSQL, write's closure takes a "
                    + "PostgresTaskTransaction (import TaskBrokerPostgres): a closure that does not await picks this SQLite "
                    + "form, so name its parameter's type: { (tx: PostgresTaskTransaction) in … }."
            )
        }
        let hub = self.hub
        let value: T
        do {
            value = try await sqlite.pool.write { db in
                let transaction = TaskTransaction(db: db)
                let value = try body(transaction)
                let changes = try transaction.committedChanges()
                // Announced from the commit, in commit order (see `SQLiteTaskStorage.write`).
                db.afterNextTransaction { _ in hub.publish(changes) }
                return value
            }
        } catch let error as DatabaseError {
            throw TaskBrokerError(
                code: .storageFailed,
                message: "The transaction failed and was rolled back; nothing was saved.",
                underlying: error
            )
        }
        return value
    }
}
