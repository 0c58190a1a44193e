public import Foundation

/// An action that failed for the last time (``TaskResult/deadLetter(reason:)``, or its
/// ``TaskQueueBroker/Configuration/maxAttempts``-th failure): stored, never run until replayed.
public struct TaskDeadLetter: Sendable, Hashable {
    /// The action's key.
    public var key: String
    /// The action's collection.
    public var collection: String
    /// The queue it belongs to (and goes back to when replayed).
    public var queueName: String
    /// How many times it failed.
    public var attempts: Int
    /// Why its last run failed.
    public var reason: String
    /// When its last run failed.
    public var failedAt: Date
    /// The action, JSON-encoded, as stored.
    public var payload: Data

    /// Creates a dead letter.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    ///   - queueName: Its queue.
    ///   - attempts: How many times it failed.
    ///   - reason: Why its last run failed.
    ///   - failedAt: When its last run failed.
    ///   - payload: The encoded action.
    public init(key: String, collection: String, queueName: String, attempts: Int, reason: String, failedAt: Date, payload: Data) {
        self.key = key
        self.collection = collection
        self.queueName = queueName
        self.attempts = attempts
        self.reason = reason
        self.failedAt = failedAt
        self.payload = payload
    }

    init(_ task: StoredTask) {
        self.init(
            key: task.key, collection: task.collection, queueName: task.queueName, attempts: task.attempts,
            reason: task.lastFailure?.reason ?? "", failedAt: task.lastFailure?.failedAt ?? Date(timeIntervalSince1970: 0),
            payload: task.payload
        )
    }
}

extension TaskDatabase {
    /// The dead letters of one queue, or of every queue.
    ///
    /// - Parameter queueName: The queue, or `nil` (the default) for all.
    /// - Returns: The dead letters, by queue name, then in enqueue order.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`, or `.unsupported` for a backend
    ///   that keeps no dead letters.
    public func deadLetters(queueName: String? = nil) async throws -> [TaskDeadLetter] {
        let name = queueName?.normalizedName
        let ordered = try await storage.deadLetters(queueName: name)
        guard let parallel = storage as? any ParallelTaskStorage else { return ordered.map(TaskDeadLetter.init) }
        let unordered = try await parallel.parallelDeadLetters(queueName: name)
        guard !unordered.isEmpty else { return ordered.map(TaskDeadLetter.init) }
        return (ordered + unordered).sorted { ($0.queueName, $0.position) < ($1.queueName, $1.position) }.map(TaskDeadLetter.init)
    }

    /// Puts a dead letter back in its queue, at its place (its queue's head, when the actions
    /// before it are done), with its attempts counted from zero. A head that has started and not
    /// succeeded (running, or paused by its failure) stays first, as for any save. Brokers of every
    /// process hear of it as of a save.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: `true` if a dead letter had that key and collection.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed` or `.unsupported`.
    @discardableResult
    public func replayDeadLetter(key: String, collection: String) async throws -> Bool {
        if let replayed = try await storage.replayDeadLetter(key: key.normalizedName, collection: collection.normalizedName) {
            publish([.saved(replayed)])
            return true
        }
        guard let parallel = storage as? any ParallelTaskStorage,
              let replayed = try await parallel.replayParallelDeadLetter(key: key.normalizedName, collection: collection.normalizedName)
        else { return false }
        publish([.parallelReady(queueNames: [replayed.queueName])])
        return true
    }

    /// Deletes a dead letter.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: `true` if a dead letter had that key and collection (a stored action that is
    ///   not a dead letter is left alone).
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed` or `.unsupported`.
    @discardableResult
    public func discardDeadLetter(key: String, collection: String) async throws -> Bool {
        if try await storage.discardDeadLetter(key: key.normalizedName, collection: collection.normalizedName) != nil { return true }
        guard let parallel = storage as? any ParallelTaskStorage else { return false }
        return try await parallel.discardParallelDeadLetter(key: key.normalizedName, collection: collection.normalizedName) != nil
    }
}

extension TaskDatabase {
    /// The stored action with this key and collection, live (waiting, paused or running) or a
    /// dead letter: what an operator looks at.
    ///
    /// - Parameters:
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    /// - Returns: The action and its state, or `nil` when none is stored (it completed, or never was).
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`, or `.unsupported` for a backend
    ///   that cannot find an action by its key.
    public func lookup(key: String, collection: String) async throws -> TaskLookup? {
        if let found = try await storage.lookup(key: key.normalizedName, collection: collection.normalizedName) { return found }
        guard let parallel = storage as? any ParallelTaskStorage else { return nil }
        return try await parallel.lookupParallel(key: key.normalizedName, collection: collection.normalizedName)
    }
}
