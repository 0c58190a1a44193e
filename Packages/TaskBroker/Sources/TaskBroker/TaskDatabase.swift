public import Foundation
public import GRDB
import QueuePersistence
import Synchronization

/// Where a broker's actions live: saving an action enqueues it, deleting it cancels it.
///
/// ```swift
/// let database = try await TaskDatabase.sqlite(path: "/var/lib/app/tasks.sqlite")
/// try await database.save(MessageSendAction(key: "m1", collection: "messages", queueName: "handler1-q"))
/// ```
///
/// A `TaskDatabase` wraps a ``TaskStorage`` backend. ``sqlite(path:configuration:)`` is the embedded
/// default; ``init(storage:)`` takes any other backend. Every write made through one
/// `TaskDatabase` wakes the brokers set up on it at once; there is no polling.
public final class TaskDatabase: Sendable {
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

        /// How durable a commit is. Defaults to ``Synchronous/full``.
        public var synchronous: Synchronous
        /// How long a write waits for another process's lock before failing. Defaults to 5 s.
        public var busyTimeout: TimeInterval
        /// Whether ``TaskDatabase/sqlite(path:configuration:)`` creates a missing file (the
        /// default). Set it to `false` to open an existing file only: a missing one fails with
        /// ``TaskBrokerError/Code/databaseNotFound`` and nothing is created (for tools that
        /// inspect a worker's file).
        public var createsMissingFile: Bool

        /// Creates a configuration; every field has a default.
        ///
        /// - Parameters:
        ///   - synchronous: How durable a commit is.
        ///   - busyTimeout: How long a write waits for another process's lock, in seconds.
        ///   - createsMissingFile: Whether a missing file is created; `false` opens existing files only.
        public init(synchronous: Synchronous = .full, busyTimeout: TimeInterval = 5, createsMissingFile: Bool = true) {
            self.synchronous = synchronous
            self.busyTimeout = busyTimeout
            self.createsMissingFile = createsMissingFile
        }
    }

    /// The backend that stores the actions.
    public let storage: any TaskStorage
    let sqlite: SQLiteTaskStorage?
    let hub: DatabaseHub
    var notifier: ChangeNotifier { hub.notifier }
    var registry: ClaimRegistry { hub.registry }

    /// Wraps a backend (an in-memory fake, or another database).
    ///
    /// - Parameter storage: The backend.
    public init(storage: any TaskStorage) {
        self.storage = storage
        self.sqlite = storage as? SQLiteTaskStorage
        self.hub = sqlite.map { DatabaseHub.shared(forPath: $0.path) } ?? DatabaseHub()
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
    /// - Throws: ``TaskBrokerError`` with code `.databaseNotFound` when the file is missing and
    ///   `configuration.createsMissingFile` is `false`, `.corruptDatabase` when the file is not a
    ///   QueueKit SQLite database or is corrupt, `.incompatibleSchema` when a newer TaskBroker wrote
    ///   it, `.storageFailed` when it cannot be opened or migrated otherwise (a missing folder, permissions).
    public static func sqlite(path: String, configuration: Configuration = .init()) async throws -> TaskDatabase {
        TaskDatabase(storage: try await SQLiteTaskStorage.open(path: path, configuration: configuration))
    }

    /// Enqueues an action, or replaces the stored action with the same key and collection
    /// (which clears its pause, so it runs again without waiting for an old timer).
    ///
    /// When this returns the action is committed (durably, with the default configuration).
    ///
    /// - Parameter action: The action to enqueue.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed` or `.storageFailed`.
    public func save<Action: TaskQueueAction>(_ action: Action) async throws {
        try await save([action])
    }

    /// Enqueues several actions in one transaction.
    ///
    /// - Parameter actions: The actions to enqueue, in order.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed` or `.storageFailed`; nothing is saved then.
    public func save<Action: TaskQueueAction>(_ actions: [Action]) async throws {
        let encoder = JSONEncoder()
        let tasks = try actions.map { try NewTask(encoding: $0, with: encoder) }
        let stored = try await storage.save(tasks)
        notifier.notify(stored.map { .saved($0) })
    }

    /// Deletes an action: it is cancelled. If a broker is running it, it is not run again and its
    /// completion is ignored.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: `true` if an action was deleted.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    @discardableResult
    public func delete(key: String, collection: String) async throws -> Bool {
        guard let deleted = try await storage.delete(key: key, collection: collection) else { return false }
        notifier.notify([.deleted(deleted)])
        return true
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
    /// - Throws: What `body` throws (unchanged), or ``TaskBrokerError`` with code `.storageFailed`,
    ///   or `.unsupported` when this database is not the SQLite backend.
    public func write<T: Sendable>(_ body: @escaping @Sendable (TaskTransaction) throws -> T) async throws -> T {
        guard let sqlite else {
            throw TaskBrokerError(
                code: .unsupported,
                message: "write(_:) needs the SQLite backend; save actions with save(_:) on this database."
            )
        }
        let (value, changes): (T, [TaskChange])
        do {
            (value, changes) = try await sqlite.pool.write { db in
                let transaction = TaskTransaction(db: db)
                let value = try body(transaction)
                return (value, transaction.changes)
            }
        } catch let error as DatabaseError {
            throw TaskBrokerError(
                code: .storageFailed,
                message: "The transaction failed and was rolled back; nothing was saved.",
                underlying: error
            )
        }
        notifier.notify(changes)
        return value
    }

    /// Resumes paused queues: their paused action runs again at once. Brokers of this process
    /// that own the queues start them.
    ///
    /// - Parameter queueNames: The queues to resume.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    public func restartQueues(_ queueNames: [String]) async throws {
        let resumed = try await storage.resume(queues: queueNames)
        notifier.notify([.resumed(queueNames: queueNames, tasks: resumed)])
    }

    /// Deletes every action of a queue.
    ///
    /// - Parameter queueName: The queue to empty.
    /// - Returns: How many actions were deleted.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    @discardableResult
    public func purge(queueName: String) async throws -> Int {
        let count = try await storage.purge(queue: queueName)
        notifier.notify([.purged(queueName: queueName)])
        return count
    }

    /// The stored state of every queue that has actions, sorted by name.
    ///
    /// - Returns: One snapshot per queue; `inFlight` is `nil` (ask ``TaskQueueBroker/snapshot()``).
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    public func snapshot() async throws -> [TaskQueueSnapshot] {
        try await storage.snapshot()
    }
}

/// One write transaction of ``TaskDatabase/write(_:)``: your own SQL through ``db``, actions
/// through ``save(_:)`` and ``delete(key:collection:)``.
public final class TaskTransaction {
    /// The GRDB connection inside the transaction: run your own statements on it.
    public let db: Database
    private let encoder = JSONEncoder()
    fileprivate(set) var changes: [TaskChange] = []

    init(db: Database) {
        self.db = db
    }

    /// Enqueues (or replaces) an action as part of this transaction.
    ///
    /// - Parameter action: The action to enqueue.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, or the database's error.
    public func save<Action: TaskQueueAction>(_ action: Action) throws {
        let task = try NewTask(encoding: action, with: encoder)
        changes += try SQLiteTaskStorage.save([task], in: db).map { .saved($0) }
    }

    /// Deletes (cancels) an action as part of this transaction.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: `true` if an action was deleted.
    /// - Throws: The database's error.
    @discardableResult
    public func delete(key: String, collection: String) throws -> Bool {
        guard let deleted = try SQLiteTaskStorage.delete(key: key, collection: collection, in: db) else { return false }
        changes.append(.deleted(deleted))
        return true
    }
}

@available(*, unavailable)
extension TaskTransaction: Sendable {}

extension NewTask {
    init<Action: TaskQueueAction>(encoding action: Action, with encoder: JSONEncoder) throws {
        let payload: Data
        do {
            payload = try encoder.encode(action)
        } catch {
            throw TaskBrokerError(
                code: .encodingFailed,
                message: "Could not encode action \(action.collection)/\(action.key) as JSON; check its Codable conformance.",
                underlying: error
            )
        }
        self.init(key: action.key, collection: action.collection, queueName: action.queueName, payload: payload)
    }
}

/// A change made through a ``TaskDatabase``, delivered to its brokers after the commit.
enum TaskChange: Sendable {
    case saved(StoredTask)
    case deleted(StoredTask)
    case resumed(queueNames: [String], tasks: [StoredTask])
    case purged(queueName: String)
}

/// Delivers committed changes to the brokers of one database.
final class ChangeNotifier: Sendable {
    private let listeners = Mutex<[UInt64: @Sendable ([TaskChange]) -> Void]>([:])
    private let nextID = Atomic<UInt64>(0)

    func add(_ listener: @escaping @Sendable ([TaskChange]) -> Void) -> UInt64 {
        let id = nextID.add(1, ordering: .relaxed).newValue
        listeners.withLock { $0[id] = listener }
        return id
    }

    func remove(_ id: UInt64) {
        _ = listeners.withLock { $0.removeValue(forKey: id) }
    }

    func notify(_ changes: [TaskChange]) {
        guard !changes.isEmpty else { return }
        let current = listeners.withLock { Array($0.values) }
        for listener in current {
            listener(changes)
        }
    }
}
