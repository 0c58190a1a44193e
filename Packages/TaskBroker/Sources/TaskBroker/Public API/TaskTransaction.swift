public import Foundation
public import GRDB

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
    /// Encodes an action for storage, as `TaskDatabase.save(_:)` does (for backends'
    /// own transaction types).
    ///
    /// - Parameters:
    ///   - action: The action.
    ///   - encoder: The JSON encoder to use.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed` when the action does not encode.
    public init<Action: TaskQueueAction>(encoding action: Action, with encoder: JSONEncoder) throws {
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
