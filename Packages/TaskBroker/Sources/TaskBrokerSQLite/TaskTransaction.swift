public import Foundation
public import GRDB
public import TaskBrokerCore

/// One write transaction of `TaskDatabase/write(_:)`: your own SQL through `db`, actions
/// through `save(_:)` and `delete(key:collection:)`.
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
    /// - Throws: `TaskBrokerError` with code `.encodingFailed`, or the database's error.
    public func save<Action: TaskQueueAction>(_ action: Action) throws {
        try save(action, notBefore: nil, priority: 0)
    }

    /// Enqueues an action as part of this transaction only if no action with its key and
    /// collection is stored (ready or a dead letter), as `TaskDatabase.saveIfAbsent(_:)` does.
    ///
    /// - Parameter action: The action to enqueue.
    /// - Returns: Whether it was stored.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed`, or the database's error.
    @discardableResult
    public func saveIfAbsent<Action: TaskQueueAction>(_ action: Action) throws -> Bool {
        try saveIfAbsent(action, notBefore: nil)
    }

    /// A unique save to start no earlier than `date`, with a priority, as part of this
    /// transaction, as `TaskDatabase.saveIfAbsent(_:notBefore:priority:)` does.
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); `nil` means at once.
    ///   - priority: Its turn among the ready queues of its broker: larger first (0 by default).
    /// - Returns: Whether it was stored.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed` or `.invalidArgument`, or the database's error.
    @discardableResult
    public func saveIfAbsent<Action: TaskQueueAction>(_ action: Action, notBefore date: Date?, priority: Int = 0) throws -> Bool {
        let task = try NewTask(encoding: action, with: encoder, notBefore: date, priority: priority)
        guard let stored = try SQLiteTaskStorage.saveIfAbsent(task, in: db) else { return false }
        changes.append(.saved(stored))
        return true
    }

    /// Enqueues (or replaces) an action to start no earlier than `date`, as part of this
    /// transaction, as `TaskDatabase.save(_:notBefore:)` does.
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); a date in the past means at once.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed` or `.invalidArgument`, or the database's error.
    public func save<Action: TaskQueueAction>(_ action: Action, notBefore date: Date) throws {
        try save(action, notBefore: date, priority: 0)
    }

    /// Enqueues (or replaces) an action with a priority, as part of this transaction, as
    /// `TaskDatabase.save(_:notBefore:priority:)` does.
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Its turn among the ready queues of its broker: larger first.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed` or `.invalidArgument`, or the database's error.
    public func save<Action: TaskQueueAction>(_ action: Action, notBefore date: Date? = nil, priority: Int) throws {
        let task = try NewTask(encoding: action, with: encoder, notBefore: date, priority: priority)
        changes += try SQLiteTaskStorage.save([task], in: db).map { .saved($0) }
    }

    /// Saves plain parallel actions as part of this transaction (see
    /// `TaskDatabase.saveParallel(_:notBefore:priority:)`); brokers hear of them when it commits.
    ///
    /// - Parameters:
    ///   - actions: The actions.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Their turn: larger first (0 by default).
    /// - Throws: `TaskBrokerError` with code `.encodingFailed` or `.invalidArgument`, or the database's error.
    public func saveParallel<Action: TaskQueueAction>(_ actions: [Action], notBefore date: Date? = nil, priority: Int = 0) throws {
        let tasks = try actions.map { try NewTask(encoding: $0, with: encoder, notBefore: date, priority: priority) }
        let stored = try SQLiteTaskStorage.saveParallel(tasks, in: db)
        if !stored.isEmpty { changes.append(.parallelReady(queueNames: Array(Set(stored.map(\.queueName))).sorted())) }
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
        guard let deleted = try SQLiteTaskStorage.delete(key: key.normalizedName, collection: collection.normalizedName, in: db) else {
            return false
        }
        changes.append(.deleted(deleted))
        return true
    }

    /// The saves and deletes that the transaction still holds when `body` returns: those rolled
    /// back with a savepoint (`tx.db.inSavepoint { … return .rollback }`) are left out. Announced,
    /// a rolled-back delete made the brokers forget an action that stays stored (it waited for a
    /// restart), and a rolled-back save would announce an action that was never stored.
    ///
    /// One primary-key lookup per change, in the transaction.
    ///
    /// - Throws: The database's error, or `TaskBrokerError` `.corruptDatabase` for a damaged row.
    func committedChanges() throws -> [TaskChange] {
        guard !changes.isEmpty else { return [] }
        let stored = try db.cachedStatement(sql: """
            SELECT \(SQLiteTaskStorage.selectedColumns) FROM taskbroker_action WHERE collection = ? AND key = ?
            """)
        func current(_ task: StoredTask) throws -> StoredTask? {
            try Row.fetchOne(stored, arguments: [task.collection, task.key]).map(SQLiteTaskStorage.task(from:))
        }
        return try changes.filter { change in
            switch change {
            case .saved(let task):
                // The same revision is not enough: the rollback also took the revision counter
                // back, so a later save in this transaction may have the same revision.
                guard let current = try current(task) else { return false }
                return current.revision == task.revision && current.queueName == task.queueName
                    && current.payload == task.payload && current.position == task.position
            case .deleted(let task):
                return try current(task)?.revision != task.revision
            case .completed, .resumed, .purged, .external, .externalEverywhere, .unowned, .spareCapacity, .parallelReady, .touched:
                return true
            }
        }
    }
}

@available(*, unavailable)
extension TaskTransaction: Sendable {}
