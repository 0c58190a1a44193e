import Foundation

// What an operator does and reads: delete actions, restart, purge and pause queues, and read the
// queues, the schedules, the rate limits' starts and the workers.
extension TaskDatabase {
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
        if let deleted = try await storage.delete(key: key.normalizedName, collection: collection.normalizedName) {
            publish([.deleted(deleted)])
            return true
        }
        guard let parallel = storage as? any ParallelTaskStorage else { return false }
        return try await parallel.deleteParallel(key: key.normalizedName, collection: collection.normalizedName) != nil
    }

    /// Resumes paused queues: their paused action runs again at once. Brokers of this process
    /// that own the queues start them.
    ///
    /// - Parameter queueNames: The queues to resume.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    public func restartQueues(_ queueNames: [String]) async throws {
        let queueNames = queueNames.map(\.normalizedName)
        let resumed = try await storage.resume(queues: queueNames)
        publish([.resumed(queueNames: queueNames, tasks: resumed)])
    }

    /// Deletes every action of a queue.
    ///
    /// - Parameter queueName: The queue to empty.
    /// - Returns: How many actions were deleted.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    @discardableResult
    public func purge(queueName: String) async throws -> Int {
        let queueName = queueName.normalizedName
        let count = try await storage.purge(queue: queueName)
        publish([.purged(queueName: queueName)])
        return count
    }

    /// The stored state of every queue that has actions or that an operator paused, sorted by name.
    ///
    /// - Returns: One snapshot per queue; `inFlight` is `nil` (ask ``TaskQueueBroker/snapshot()``).
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    public func snapshot() async throws -> [TaskQueueSnapshot] {
        var snapshots = try await storage.snapshot()
        if let parallel = storage as? any ParallelTaskStorage {
            var counts = try await parallel.parallelCounts()
            if !counts.isEmpty {
                for index in snapshots.indices {
                    guard let count = counts.removeValue(forKey: snapshots[index].name) else { continue }
                    snapshots[index].parallelPending = count.pending
                    snapshots[index].deadLetters += count.deadLetters
                    snapshots[index].oldestSavedAt = [snapshots[index].oldestSavedAt, count.oldestSavedAt].compactMap { $0 }.min()
                }
                for (name, count) in counts {
                    var snapshot = TaskQueueSnapshot(name: name, pending: 0, deadLetters: count.deadLetters)
                    snapshot.parallelPending = count.pending
                    snapshot.oldestSavedAt = count.oldestSavedAt
                    snapshots.append(snapshot)
                }
                snapshots.sort { $0.name < $1.name }
            }
        }
        var paused = try await storage.pausedQueues(among: nil)
        guard !paused.isEmpty else { return snapshots }
        for index in snapshots.indices where paused.remove(snapshots[index].name) != nil {
            snapshots[index].pausedByOperator = true
        }
        snapshots += paused.map { TaskQueueSnapshot(name: $0, pending: 0, pausedByOperator: true) }
        return snapshots.sorted { $0.name < $1.name }
    }

    /// The schedules stored in this database (``TaskScheduler``), sorted by name: each one's last
    /// tick, when it was recorded and the key of its action, and its next tick.
    ///
    /// - Returns: One state per schedule any scheduler has run on this database.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`, or `.unsupported` for a backend
    ///   without schedules.
    public func schedules() async throws -> [TaskScheduleState] {
        try await storage.schedules()
    }

    /// The starts each rate limit's bucket counts now (``TaskQueueBroker/Configuration-swift.struct/rateLimits``):
    /// those every broker of the database recorded that are still inside their windows, by bucket.
    /// A limit itself is set in each broker's configuration, not stored; this is what its bucket
    /// holds.
    ///
    /// - Returns: One usage per bucket with starts in their windows, sorted by bucket.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    public func rateLimitUsage() async throws -> [TaskRateUsage] {
        try await storage.rateLimitUsage(now: Date())
    }

    /// The brokers that hold leases on this database now (PostgreSQL): each with its registered
    /// name, the queues whose leases it holds and until when, and the plain parallel actions it
    /// holds. An SQLite file's brokers share one machine and take queues through its file locks,
    /// with no leases: there, this is empty.
    ///
    /// - Returns: One worker per lease owner, sorted by owner.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    public func workers() async throws -> [TaskWorker] {
        try await storage.workers()
    }

    /// Pauses queues for an operator: a paused queue starts nothing (an action it is running
    /// finishes), in every process, across restarts, until ``resumeQueues(_:)``; saves into it are
    /// kept. ``snapshot()`` shows it as ``TaskQueueSnapshot/pausedByOperator``, apart from a failure's
    /// pause (which ``restartQueues(_:)`` clears). A queue need not have actions to be paused.
    ///
    /// - Parameter queueNames: The queues to pause.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`, or `.unsupported` for a backend
    ///   that cannot pause queues.
    public func pauseQueues(_ queueNames: [String]) async throws {
        let changed = try await storage.setPaused(true, queues: queueNames.map(\.normalizedName))
        if !changed.isEmpty { publish([.external(queueNames: changed)]) }
    }

    /// Resumes queues an operator paused (``pauseQueues(_:)``): their brokers, in every process,
    /// run them again.
    ///
    /// - Parameter queueNames: The queues to resume.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`, or `.unsupported`.
    public func resumeQueues(_ queueNames: [String]) async throws {
        let changed = try await storage.setPaused(false, queues: queueNames.map(\.normalizedName))
        if !changed.isEmpty { publish([.external(queueNames: changed)]) }
    }
}
