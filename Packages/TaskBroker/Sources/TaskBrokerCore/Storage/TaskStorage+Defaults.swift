public import Foundation

// What a backend gets unless it does better: reads built on the ones it must have, and no leases.
extension TaskStorage {
    /// Reads the queues one at a time through ``tasks(inQueue:)``.
    ///
    /// - Parameter queueNames: The queues.
    /// - Returns: The actions of each queue that has some.
    /// - Throws: What ``tasks(inQueue:)`` throws.
    public func tasks(inQueues queueNames: [String]) async throws -> [String: [StoredTask]] {
        var result: [String: [StoredTask]] = [:]
        for queueName in queueNames {
            let tasks = try await tasks(inQueue: queueName)
            if !tasks.isEmpty { result[queueName] = tasks }
        }
        return result
    }

    /// Lists every queue through ``queueNames()`` and keeps a page of them.
    ///
    /// - Parameters:
    ///   - name: The name the page starts after.
    ///   - limit: The most names returned.
    /// - Returns: The names after `name`, sorted.
    /// - Throws: What ``queueNames()`` throws.
    public func queueNames(after name: String?, limit: Int) async throws -> [String] {
        let names = try await queueNames()
        let start = name.map { after in names.firstIndex { $0 > after } ?? names.endIndex } ?? names.startIndex
        return Array(names[start...].prefix(max(1, limit)))
    }

    /// Reads the queues whole through ``tasks(inQueues:)`` and keeps the first `limit` actions
    /// of each after the given position.
    ///
    /// - Parameters:
    ///   - queueNames: The queues.
    ///   - positions: Per queue, the position the actions returned come after.
    ///   - limit: The most actions returned per queue.
    /// - Returns: The actions of each queue that has some.
    /// - Throws: What ``tasks(inQueues:)`` throws.
    public func tasks(inQueues queueNames: [String], after positions: [String: Int64], limit: Int) async throws -> [String: [StoredTask]] {
        var result: [String: [StoredTask]] = [:]
        for (queueName, tasks) in try await tasks(inQueues: queueNames) {
            let after = positions[queueName] ?? .min
            let kept = tasks.lazy.filter { $0.position > after }.prefix(max(1, limit))
            if !kept.isEmpty { result[queueName] = Array(kept) }
        }
        return result
    }

    /// The first `limit` stored actions of each of several queues, in enqueue order
    /// (``tasks(inQueues:after:limit:)`` from each queue's start).
    ///
    /// - Parameters:
    ///   - queueNames: The queues.
    ///   - limit: The most actions returned per queue.
    /// - Returns: The first actions of each queue that has some.
    /// - Throws: What ``tasks(inQueues:after:limit:)`` throws.
    public func tasks(inQueues queueNames: [String], limit: Int) async throws -> [String: [StoredTask]] {
        try await tasks(inQueues: queueNames, after: [:], limit: limit)
    }

    /// Reads every queue whole (``queueNames()``, ``tasks(inQueues:)``) and keeps the actions in
    /// the range.
    ///
    /// - Parameters:
    ///   - cursor: The entry the page starts after.
    ///   - through: The latest not-before time returned.
    ///   - limit: The most entries returned.
    /// - Returns: The entries in (not-before, position) order.
    /// - Throws: What ``tasks(inQueues:)`` throws.
    public func scheduled(after cursor: TaskScheduleEntry?, through: Date, limit: Int) async throws -> [TaskScheduleEntry] {
        try await scheduleEntries().filter { entry in
            entry.notBefore <= through && cursor.map { entry.notBefore > $0.notBefore || (entry.notBefore == $0.notBefore && entry.position > $0.position) } ?? true
        }.prefix(max(1, limit)).map { $0 }
    }

    /// Reads every queue whole (``queueNames()``, ``tasks(inQueues:)``) and keeps the earliest time.
    ///
    /// - Parameter date: The time the answer is after.
    /// - Returns: The earliest not-before time after `date`.
    /// - Throws: What ``tasks(inQueues:)`` throws.
    public func nextNotBefore(after date: Date) async throws -> Date? {
        try await scheduleEntries().lazy.map(\.notBefore).first { $0 > date }
    }

    /// Every stored action with a not-before time, in (not-before, position) order.
    private func scheduleEntries() async throws -> [TaskScheduleEntry] {
        try await tasks(inQueues: try await queueNames()).values.joined().compactMap { task in
            task.notBefore.map { TaskScheduleEntry(queueName: task.queueName, notBefore: $0, position: task.position) }
        }.sorted()
    }

    /// Schedules need the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func registerSchedules(_ schedules: [TaskScheduleState]) async throws {
        throw Self.noSchedules
    }

    /// Schedules need the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func recordTick(schedule name: String, tick: Date, next: Date?, task: NewTask) async throws -> TaskTickRecord {
        throw Self.noSchedules
    }

    /// Schedules need the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func schedules() async throws -> [TaskScheduleState] {
        throw Self.noSchedules
    }

    /// Rate limits need the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func acquireStarts(bucket: String, limit: Int, period: Duration, count: Int, now: Date) async throws -> TaskRateGrant {
        throw TaskBrokerError(code: .unsupported, message: "This storage backend cannot count starts for rate limits.")
    }

    /// Rate limits need the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func releaseStarts(bucket: String, at: Date, count: Int) async throws {
        throw TaskBrokerError(code: .unsupported, message: "This storage backend cannot count starts for rate limits.")
    }

    /// A backend without rate limits counts no starts.
    public func rateLimitUsage(now: Date) async throws -> [TaskRateUsage] {
        []
    }

    /// A backend without leases has no workers to list.
    public func workers() async throws -> [TaskWorker] {
        []
    }

    private static var noSchedules: TaskBrokerError {
        TaskBrokerError(code: .unsupported, message: "This storage backend cannot store schedules.")
    }

    /// Dead letters need the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func deadLetters(queueName: String?) async throws -> [StoredTask] {
        throw Self.noDeadLetters
    }

    /// Finding an action by its key needs the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func lookup(key: String, collection: String) async throws -> TaskLookup? {
        throw TaskBrokerError(code: .unsupported, message: "This storage backend cannot find an action by its key.")
    }

    /// Dead letters need the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func replayDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        throw Self.noDeadLetters
    }

    /// Dead letters need the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func discardDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        throw Self.noDeadLetters
    }

    /// Unique saves need the backend's support (a check and a save apart are not atomic).
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func saveIfAbsent(_ task: NewTask) async throws -> StoredTask? {
        throw TaskBrokerError(code: .unsupported, message: "This storage backend (\(Self.self)) cannot save an action only if it is absent.")
    }

    /// Pausing queues needs the backend's support.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported`.
    public func setPaused(_ paused: Bool, queues queueNames: [String]) async throws -> [String] {
        throw TaskBrokerError(code: .unsupported, message: "This storage backend (\(Self.self)) cannot pause queues.")
    }

    /// No queue is paused by an operator.
    ///
    /// - Returns: An empty set.
    public func pausedQueues(among queueNames: [String]?) async throws -> Set<String> {
        []
    }

    private static var noDeadLetters: TaskBrokerError {
        TaskBrokerError(code: .unsupported, message: "This storage backend (\(Self.self)) keeps no dead letters.")
    }

    /// No change feed: every change is made through this process's ``TaskDatabase``.
    ///
    /// - Returns: `nil`.
    public func changes() async throws -> AsyncStream<[TaskStorageChange]>? {
        nil
    }

    /// Not shared: one process uses the backend.
    public var isShared: Bool { false }

    /// The broker's lease duration applies.
    public var leaseDuration: Duration? { nil }

    /// No leases to renew.
    ///
    /// - Returns: No lost queues.
    public func renew(_ leases: [TaskQueueLease], owner: String, leaseDuration: Duration) async throws -> [TaskQueueLease] {
        []
    }

    /// No leases to release.
    public func release(_ leases: [TaskQueueLease], owner: String) async throws {}

    /// No other processes to tell.
    public func announceSpareCapacity(pool: String, room: Int) async throws {}

    /// No leases: stores the outcomes (``finish(_:owner:)``) and claims no next head.
    ///
    /// - Returns: What ``finish(_:owner:)`` returns.
    /// - Throws: What ``finish(_:owner:)`` throws.
    @discardableResult
    public func finish(
        _ outcomes: [TaskOutcome], claimingNext nextHeads: [String: StoredTask], owner: String, leaseDuration: Duration
    ) async throws -> TaskFinishReport {
        try await finish(outcomes, owner: owner)
    }
}
