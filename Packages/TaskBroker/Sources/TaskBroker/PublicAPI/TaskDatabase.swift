public import Foundation
import GRDB
import QueuePersistence
import Synchronization
import Tracing

/// Where a broker's actions live: saving an action enqueues it, deleting it cancels it.
///
/// ```swift
/// let database = try await TaskDatabase.sqlite(path: "/var/lib/app/tasks.sqlite")
/// try await database.save(MessageSendAction(key: "m1", collection: "messages", queueName: "handler1-q"))
/// ```
///
/// A `TaskDatabase` wraps a ``TaskStorage`` backend. ``sqlite(path:configuration:)`` is the embedded
/// default; ``init(storage:)`` takes any other backend. Every write made through one
/// `TaskDatabase` wakes the brokers set up on it at once; there is no polling. On Linux, a write
/// another process commits to the same SQLite file (the `queuekit` tool, an app process that only
/// enqueues) wakes them too: the file keeps a short journal of changed queues, and the brokers
/// learn of each commit through inotify.
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
        /// How long a write waits for another process's lock before failing, in seconds. Defaults
        /// to 5 s. Any value is accepted: NaN or negative counts as 0, infinity as about 31 years.
        /// A write that gives up is retried by the broker with ``TaskQueueBroker/Configuration/storageRetryBackoff``.
        public var busyTimeout: TimeInterval
        /// Whether ``TaskDatabase/sqlite(path:configuration:)`` creates a missing file (the
        /// default). Set it to `false` to open an existing file only: a missing one fails with
        /// ``TaskBrokerError/Code/databaseNotFound`` and nothing is created (for tools that
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

    /// The backend that stores the actions.
    public let storage: any TaskStorage
    let sqlite: SQLiteTaskStorage?
    let hub: DatabaseHub
    var registry: ClaimRegistry { hub.registry }

    /// Wraps a backend (an in-memory fake, or another database).
    ///
    /// - Parameter storage: The backend.
    public init(storage: any TaskStorage) {
        self.storage = storage
        self.sqlite = storage as? SQLiteTaskStorage
        self.hub = sqlite?.hub ?? DatabaseHub()
    }

    /// Registers a broker: in this process (no other broker of the same name or an overlapping
    /// prefix) and against brokers of other processes (on an SQLite file, their locks; on a shared
    /// backend that keeps broker names, ``SharedBrokerNames``), then starts watching for other
    /// processes' changes.
    func register(_ claim: BrokerClaim) async throws -> BrokerRegistration {
        let brokerID = try registry.register(claim)
        if storage.isShared {
            // Brokers of the same name on other connections or in other processes are workers of
            // one pool: the leases keep them apart. Listen before the stored queues are listed.
            do {
                try await hub.retainFeed(storage)
            } catch {
                registry.unregister(brokerID)
                throw error
            }
            // Against brokers of other processes whose names overlap this one's.
            let names = storage as? any SharedBrokerNames
            do {
                try await names?.registerBroker(name: claim.name, claimsPrefix: claim.isPrefixClaim)
            } catch {
                hub.releaseFeed()
                registry.unregister(brokerID)
                throw error
            }
            return BrokerRegistration(brokerID: brokerID, claim: claim, hub: hub, watches: false, feeds: true, names: names)
        }
        guard let sqlite, let locks = hub.locks else {
            return BrokerRegistration(brokerID: brokerID, claim: claim, hub: hub, watches: false)
        }
        var locked = false
        do {
            locked = try locks.lock(claim.name)
            guard locked else {
                throw TaskBrokerError(
                    code: .queueAlreadyClaimed,
                    message: "Another process runs a broker named \"\(claim.name)\" on \(sqlite.path); an SQLite file serves one worker process per broker. Stop it first, or use PostgreSQL (TaskBrokerPostgres) for several worker processes."
                )
            }
            for other in try await sqlite.recordBroker(claim) {
                if let conflict = claim.conflict(with: other), try locks.isHeldElsewhere(other.name) {
                    throw TaskBrokerError(
                        code: .queueAlreadyClaimed,
                        message: "Another process runs broker \"\(other.name)\" on \(sqlite.path). \(conflict.message)"
                    )
                }
            }
            hub.retainWatcher(sqlite, head: try await sqlite.journalHead())
        } catch {
            if locked { locks.unlock(claim.name) }
            registry.unregister(brokerID)
            throw error
        }
        return BrokerRegistration(brokerID: brokerID, claim: claim, hub: hub, watches: true)
    }

    /// Delivers changes made through this database to its brokers, unless the backend's change
    /// feed delivers them (shared backends: every process sees every commit the same way) or the
    /// backend announced them from the commit (SQLite: in commit order, which this call, made
    /// after the write returned, cannot promise).
    func publish(_ changes: [TaskChange]) {
        guard !storage.isShared, sqlite == nil else { return }
        hub.publish(changes)
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
        try await save(actions, notBefore: nil, priority: 0)
    }

    /// Enqueues an action to start no earlier than `date` (run later), or replaces the stored
    /// action with the same key and collection.
    ///
    /// The action is stored at once and keeps its place in its queue: the queue's later actions
    /// wait behind it (each queue runs in order), while other queues go on. A date in the past
    /// means at once. The time survives restarts; a broker wakes up for the earliest time it
    /// knows of, with one timer, and finds the actions whose time has come through an index.
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock).
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument` (a date that
    ///   is no time) or `.storageFailed`.
    public func save<Action: TaskQueueAction>(_ action: Action, notBefore date: Date) async throws {
        try await save([action], notBefore: date)
    }

    /// Enqueues several actions in one transaction, each to start no earlier than `date`, as the
    /// single-action form does.
    ///
    /// - Parameters:
    ///   - actions: The actions to enqueue, in order.
    ///   - date: The earliest start (wall clock).
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument` or
    ///   `.storageFailed`; nothing is saved then.
    public func save<Action: TaskQueueAction>(_ actions: [Action], notBefore date: Date) async throws {
        try await save(actions, notBefore: date, priority: 0)
    }

    /// Enqueues an action with a priority, or replaces the stored action with the same key and
    /// collection: when more queues of a broker may start than it has slots, a queue whose head
    /// has the larger priority starts first (0 is the default; negative numbers run after it).
    /// Within a queue the order does not change: each queue runs in order.
    ///
    /// ```swift
    /// try await database.save(PasswordResetMail(key: id, queueName: "mail-\(user)"), priority: 10)
    /// try await database.save(Digest(key: day, queueName: "mail-digest"), notBefore: tomorrow, priority: -1)
    /// ```
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Its turn among the ready queues of its broker: larger first.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument` or `.storageFailed`.
    public func save<Action: TaskQueueAction>(_ action: Action, notBefore date: Date? = nil, priority: Int) async throws {
        try await save([action], notBefore: date, priority: priority)
    }

    /// Enqueues several actions in one transaction, each with `priority`, as the single-action
    /// form does.
    ///
    /// - Parameters:
    ///   - actions: The actions to enqueue, in order.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Their turn among the ready queues of their broker: larger first.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument` or
    ///   `.storageFailed`; nothing is saved then.
    public func save<Action: TaskQueueAction>(_ actions: [Action], notBefore date: Date? = nil, priority: Int) async throws {
        try await withSpan("TaskBroker save", ofKind: .producer) { span in
            span.attributes["taskbroker.count"] = actions.count
            if let first = actions.first { span.attributes["taskbroker.queue"] = first.queueName }
            let encoder = JSONEncoder()
            let tasks = try actions.map { try NewTask(encoding: $0, with: encoder, notBefore: date, priority: priority) }
            let stored = try await storage.save(tasks)
            publish(stored.map { .saved($0) })
        }
    }

    /// Saves plain parallel actions: actions that need no order among themselves. They run side by
    /// side, up to ``TaskQueueBroker/Configuration/maxConcurrentParallelActions`` at once per broker,
    /// in every process that runs a broker whose name is a prefix of their queue name (or whose
    /// filter accepts it), larger priority first, then saved first. Each runs at least once under a
    /// claim of its own (on PostgreSQL, a lease with a fencing token: a worker whose claim expired
    /// stores nothing); a failure is retried as the handler says, ``TaskQueueBroker/Configuration/maxAttempts``
    /// and the time limit apply, and the last failure makes it a dead letter. Their queue name only
    /// groups them: an operator's pause holds them, rate limits do not, and they never wait for the
    /// queue's ordered actions nor those for them.
    ///
    /// ```swift
    /// try await database.saveParallel(users.map { WelcomeMail(key: $0.id, queueName: "mail-welcome") })
    /// ```
    ///
    /// An action whose key and collection are stored as a plain parallel action replaces it; the
    /// same key and collection may also be stored once as a queue's ordered action.
    ///
    /// - Parameters:
    ///   - actions: The actions.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Their turn: larger first (0 by default).
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument`,
    ///   `.storageFailed`, or `.unsupported` for a backend without plain parallel actions; nothing
    ///   is saved then.
    public func saveParallel<Action: TaskQueueAction>(_ actions: [Action], notBefore date: Date? = nil, priority: Int = 0) async throws {
        guard let storage = storage as? any ParallelTaskStorage else {
            throw TaskBrokerError(code: .unsupported, message: "This storage backend does not store plain parallel actions; nothing was saved.")
        }
        try await withSpan("TaskBroker save", ofKind: .producer) { span in
            span.attributes["taskbroker.count"] = actions.count
            if let first = actions.first { span.attributes["taskbroker.queue"] = first.queueName }
            let encoder = JSONEncoder()
            let tasks = try actions.map { try NewTask(encoding: $0, with: encoder, notBefore: date, priority: priority) }
            let stored = try await storage.saveParallel(tasks)
            if !stored.isEmpty { publish([.parallelReady(queueNames: Array(Set(stored.map(\.queueName))).sorted())]) }
        }
    }

    /// Saves one plain parallel action (see `saveParallel(_:notBefore:priority:)` for many).
    ///
    /// - Parameters:
    ///   - action: The action.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Its turn: larger first (0 by default).
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument`,
    ///   `.storageFailed`, or `.unsupported`.
    public func saveParallel<Action: TaskQueueAction>(_ action: Action, notBefore date: Date? = nil, priority: Int = 0) async throws {
        try await saveParallel([action], notBefore: date, priority: priority)
    }

    /// Enqueues an action only if no action with its key and collection is stored (ready, running
    /// or a dead letter): a unique save. Atomic across processes: of several saving the same key at
    /// once, one stores it. An action that completed is no longer stored: its key may be saved again.
    ///
    /// - Parameter action: The action to enqueue.
    /// - Returns: Whether it was stored.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.storageFailed`, or `.unsupported`
    ///   for a backend without unique saves.
    @discardableResult
    public func saveIfAbsent<Action: TaskQueueAction>(_ action: Action) async throws -> Bool {
        try await saveIfAbsent(action, notBefore: nil)
    }

    /// A unique save (see ``saveIfAbsent(_:)``) to start no earlier than `date`, with a priority:
    /// a reminder scheduled once however many requests ask for it.
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); `nil` means at once.
    ///   - priority: Its turn among the ready queues of its broker: larger first (0 by default).
    /// - Returns: Whether it was stored.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument`,
    ///   `.storageFailed`, or `.unsupported` for a backend without unique saves.
    @discardableResult
    public func saveIfAbsent<Action: TaskQueueAction>(_ action: Action, notBefore date: Date?, priority: Int = 0) async throws -> Bool {
        try await withSpan("TaskBroker save", ofKind: .producer) { span in
            span.attributes["taskbroker.count"] = 1
            span.attributes["taskbroker.queue"] = action.queueName
            let task = try NewTask(encoding: action, with: JSONEncoder(), notBefore: date, priority: priority)
            guard let stored = try await storage.saveIfAbsent(task) else { return false }
            publish([.saved(stored)])
            return true
        }
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
