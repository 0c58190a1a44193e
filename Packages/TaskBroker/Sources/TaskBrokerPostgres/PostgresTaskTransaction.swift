public import Foundation
public import PostgresNIO
public import TaskBrokerCore

/// One PostgreSQL transaction of `TaskBroker/TaskDatabase/write(_:)-(PostgresTaskTransaction)`: your own SQL
/// through `connection`, actions through `save(_:)` and `delete(key:collection:)`,
/// committed together or not at all.
public final class PostgresTaskTransaction {
    /// The connection inside the transaction: run your own statements on it.
    public let connection: PostgresConnection
    let storage: PostgresTaskStorage
    private let encoder = JSONEncoder()

    init(connection: PostgresConnection, storage: PostgresTaskStorage) {
        self.connection = connection
        self.storage = storage
    }

    /// Runs one of your statements in the transaction.
    ///
    /// - Parameter query: The statement, with its binds (`"INSERT INTO message VALUES (\(id))"`).
    /// - Returns: The rows it returns.
    /// - Throws: PostgreSQL's error; throw it on from your body to roll everything back.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRowSequence {
        try await connection.query(query, logger: storage.logger)
    }

    /// Runs one of your statements in the transaction and reads its result to the end (for
    /// statements whose rows you do not need: `CREATE`, `INSERT`, `UPDATE`).
    ///
    /// - Parameter query: The statement, with its binds.
    /// - Throws: PostgreSQL's error; throw it on from your body to roll everything back.
    public func execute(_ query: PostgresQuery) async throws {
        try await connection.execute(query, logger: storage.logger)
    }

    /// Enqueues (or replaces) an action as part of this transaction.
    ///
    /// - Parameter action: The action to enqueue.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed`, or PostgreSQL's error.
    public func save<Action: TaskQueueAction>(_ action: Action) async throws {
        try await save(action, notBefore: nil, priority: 0)
    }

    /// Saves plain parallel actions as part of this transaction (see
    /// `TaskDatabase.saveParallel(_:notBefore:priority:)`); workers hear of them when it commits.
    ///
    /// - Parameters:
    ///   - actions: The actions.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Their turn: larger first (0 by default).
    /// - Throws: `TaskBrokerError` with code `.encodingFailed`, `.invalidArgument` or `.invalidName`,
    ///   or PostgreSQL's error.
    public func saveParallel<Action: TaskQueueAction>(_ actions: [Action], notBefore date: Date? = nil, priority: Int = 0) async throws {
        let tasks = try actions.map { try NewTask(encoding: $0, with: encoder, notBefore: date, priority: priority) }
        _ = try await storage.saveParallel(tasks, on: connection)
    }

    /// Enqueues an action as part of this transaction only if no action with its key and
    /// collection is stored (ready or a dead letter), as `TaskDatabase.saveIfAbsent(_:)` does. A
    /// transaction of another process saving the same key at once waits for this one.
    ///
    /// - Parameter action: The action to enqueue.
    /// - Returns: Whether it was stored.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed` or `.invalidName`, or PostgreSQL's error.
    @discardableResult
    public func saveIfAbsent<Action: TaskQueueAction>(_ action: Action) async throws -> Bool {
        try await saveIfAbsent(action, notBefore: nil)
    }

    /// A unique save to start no earlier than `date`, with a priority, as part of this
    /// transaction (see `TaskDatabase.saveIfAbsent(_:notBefore:priority:)`).
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); `nil` means at once.
    ///   - priority: Its turn among the ready queues of its broker: larger first (0 by default).
    /// - Returns: Whether it was stored.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed`, `.invalidArgument` or `.invalidName`, or PostgreSQL's error.
    @discardableResult
    public func saveIfAbsent<Action: TaskQueueAction>(_ action: Action, notBefore date: Date?, priority: Int = 0) async throws -> Bool {
        let task = try NewTask(encoding: action, with: encoder, notBefore: date, priority: priority)
        return try await storage.saveIfAbsent(task, on: connection) != nil
    }

    /// Enqueues (or replaces) an action to start no earlier than `date`, as part of this
    /// transaction (see `TaskDatabase.save(_:notBefore:)`).
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); a date in the past means at once.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed` or `.invalidArgument`, or PostgreSQL's error.
    public func save<Action: TaskQueueAction>(_ action: Action, notBefore date: Date) async throws {
        try await save(action, notBefore: date, priority: 0)
    }

    /// Enqueues (or replaces) an action with a priority, as part of this transaction (see
    /// `TaskDatabase.save(_:notBefore:priority:)`).
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Its turn among the ready queues of its broker: larger first.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed` or `.invalidArgument`, or PostgreSQL's error.
    public func save<Action: TaskQueueAction>(_ action: Action, notBefore date: Date? = nil, priority: Int) async throws {
        _ = try await storage.save([try NewTask(encoding: action, with: encoder, notBefore: date, priority: priority)], on: connection)
    }

    /// Enqueues (or replaces) actions as part of this transaction, in one statement (much faster
    /// than saving them one by one). Saving one key twice keeps the last.
    ///
    /// - Parameter actions: The actions to enqueue, in order.
    /// - Throws: `TaskBrokerError` with code `.encodingFailed`, or PostgreSQL's error.
    public func save<Action: TaskQueueAction>(_ actions: [Action]) async throws {
        _ = try await storage.save(try actions.map { try NewTask(encoding: $0, with: encoder) }, on: connection)
    }

    /// Deletes (cancels) an action as part of this transaction.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: `true` if an action was deleted.
    /// - Throws: PostgreSQL's error.
    @discardableResult
    public func delete(key: String, collection: String) async throws -> Bool {
        try await storage.delete(key: key.normalizedName, collection: collection.normalizedName, on: connection) != nil
    }
}

@available(*, unavailable)
extension PostgresTaskTransaction: Sendable {}
