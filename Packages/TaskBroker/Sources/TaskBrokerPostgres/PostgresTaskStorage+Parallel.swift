public import Foundation
import NIOCore
public import TaskBrokerCore
import PostgresNIO

// Plain parallel actions: rows of `parallel_action`, each claimed on its own with `FOR UPDATE SKIP
// LOCKED` (a batch per statement), fenced by the claim's token, owner and revision.
extension PostgresTaskStorage: ParallelTaskStorage {
    /// Stores plain parallel actions and notifies every worker of their queues.
    public func saveParallel(_ tasks: [NewTask]) async throws -> [StoredTask] {
        guard !tasks.isEmpty else { return [] }
        return try await transaction("save \(tasks.count) parallel action(s)", on: writeClient) { connection in
            try await self.saveParallel(tasks, on: connection)
        }
    }

    /// Saves inside a transaction the caller runs (`saveParallel(_:)`, `PostgresTaskTransaction`).
    func saveParallel(_ tasks: [NewTask], on connection: PostgresConnection) async throws -> [StoredTask] {
        try Self.checkLengths(of: tasks)
        // One statement per batch of distinct keys (an upsert cannot change one row twice).
        var stored: [StoredTask] = []
        var batch: [NewTask] = []
        var keys: Set<[String]> = []
        for task in tasks {
            if !keys.insert([task.collection, task.key]).inserted {
                stored += try await saveDistinctParallel(batch, on: connection)
                batch = []
                keys = [[task.collection, task.key]]
            }
            batch.append(task)
        }
        stored += try await saveDistinctParallel(batch, on: connection)
        try await notify(ChangeMessage.parallel(Array(Set(tasks.map(\.queueName))).sorted()), on: connection)
        return stored
    }

    private func saveDistinctParallel(_ tasks: [NewTask], on connection: PostgresConnection) async throws -> [StoredTask] {
        guard !tasks.isEmpty else { return [] }
        let rows = try await connection.query(
            sql.saveParallelQuery(
                collections: tasks.map(\.collection), keys: tasks.map(\.key), queueNames: tasks.map(\.queueName),
                payloads: tasks.map { ByteBuffer(bytes: $0.payload) },
                notBefores: tasks.map { $0.notBefore?.timeIntervalSince1970 ?? .nan }, priorities: tasks.map { Int64($0.priority) },
                traceContexts: tasks.map { TaskTraceHeaders.encoded($0.traceContext) ?? "" }
            ),
            logger: logger
        )
        var saved: [[String]: (position: Int64, revision: Int64)] = [:]
        for try await (collection, key, position, revision) in rows.decode((String, String, Int64, Int64).self) {
            saved[[collection, key]] = (position, revision)
        }
        return try tasks.map { task in
            guard let row = saved[[task.collection, task.key]] else {
                throw TaskBrokerError(code: .storageFailed, message: "The save of \(task.collection)/\(task.key) returned no row.")
            }
            return StoredTask(
                key: task.key, collection: task.collection, queueName: task.queueName, payload: task.payload,
                position: row.position, revision: row.revision, notBefore: task.notBefore, priority: task.priority,
                traceContext: task.traceContext
            )
        }
    }

    /// Claims a batch of ready actions in one statement (see `ParallelTaskStorage.claimParallel`).
    public func claimParallel(_ scope: TaskParallelScope, limit: Int, owner: String, leaseDuration: Duration, now: Date) async throws
        -> [TaskParallelClaim]
    {
        let lease = configuration.leaseDuration.milliseconds
        return try await run("claim parallel actions") {
            try await committed { [self] connection in
                var claims: [TaskParallelClaim] = []
                let query = sql.claimParallelQuery(
                    PostgresSchema.Scope(scope), limit: limit, owner: owner, leaseMilliseconds: lease, now: now.timeIntervalSince1970
                )
                for try await row in try await connection.query(query, logger: logger) {
                    let task = try PostgresSchema.task(row)
                    claims.append(TaskParallelClaim(task: task, token: try row.makeRandomAccess()[14].decode(Int64.self)))
                }
                return claims.sorted { ($0.task.priority, -$0.task.position) > ($1.task.priority, -$1.task.position) }
            }
        }
    }

    /// Stores a batch of outcomes in one statement (see `ParallelTaskStorage.finishParallel`).
    public func finishParallel(_ outcomes: [TaskParallelOutcome], owner: String) async throws -> [TaskParallelClaim] {
        guard !outcomes.isEmpty else { return [] }
        return try await run("store \(outcomes.count) parallel outcome(s)") {
            let stored = try await committed { [self] connection in
                var stored: Set<[String]> = []
                // Completions only (the usual batch): the short statement.
                let query = outcomes.allSatisfy { $0.result == .completed }
                    ? sql.completeParallelQuery(outcomes.map(\.claim), owner: owner)
                    : sql.finishParallelQuery(outcomes, owner: owner)
                for try await (collection, key) in try await connection.query(query, logger: logger).decode((String, String).self) {
                    stored.insert([collection, key])
                }
                return stored
            }
            return outcomes.map(\.claim).filter { !stored.contains([$0.task.collection, $0.task.key]) }
        }
    }

    /// Extends claims on the leases' own pool (see `ParallelTaskStorage.renewParallel`).
    public func renewParallel(_ claims: [TaskParallelClaim], owner: String, leaseDuration: Duration) async throws -> [TaskParallelClaim] {
        guard !claims.isEmpty else { return [] }
        let lease = configuration.leaseDuration.milliseconds
        return try await run("renew \(claims.count) parallel claim(s)") {
            let renewed = try await committed(within: renewalLimit, on: leaseClient) { [self] connection in
                var renewed: Set<[String]> = []
                for try await (collection, key) in try await connection.query(
                    sql.renewParallelQuery(claims, owner: owner, leaseMilliseconds: lease), logger: logger
                ).decode((String, String).self) {
                    renewed.insert([collection, key])
                }
                return renewed
            }
            return claims.filter { !renewed.contains([$0.task.collection, $0.task.key]) }
        }
    }

    /// Drops claims and notifies their queues (see `ParallelTaskStorage.releaseParallel`).
    public func releaseParallel(_ claims: [TaskParallelClaim], owner: String) async throws {
        guard !claims.isEmpty else { return }
        try await run("release \(claims.count) parallel claim(s)") {
            try await committed(on: leaseClient) { [self] connection in
                var queueNames: Set<String> = []
                for try await name in try await connection.query(sql.releaseParallelQuery(claims, owner: owner), logger: logger)
                    .decode(String.self) {
                    queueNames.insert(name)
                }
                try await notify(ChangeMessage.parallel(queueNames.sorted()), on: connection)
            }
        }
    }

    /// The next not-before time or claim expiry (see `ParallelTaskStorage.nextParallelTime`).
    public func nextParallelTime(_ scope: TaskParallelScope, owner: String, now: Date) async throws -> Date? {
        try await run("read the parallel actions' next time") {
            try await withConnection { [self] connection in
                var times: [Date] = []
                for try await (notBefore, secondsToExpiry) in try await connection.query(
                    sql.nextParallelTimeQuery(PostgresSchema.Scope(scope), owner: owner, now: now.timeIntervalSince1970), logger: logger
                ).decode((Double?, Double?).self) {
                    if let notBefore, notBefore.isFinite { times.append(Date(timeIntervalSince1970: notBefore)) }
                    // The server's clock counts the expiry; this machine's adds it to its own.
                    if let secondsToExpiry, secondsToExpiry.isFinite { times.append(now.addingTimeInterval(max(0, secondsToExpiry))) }
                }
                return times.min()
            }
        }
    }

    /// The queues that hold plain parallel actions.
    public func parallelQueueNames() async throws -> [String] {
        try await run("list the queues of parallel actions") {
            try await withConnection { [self] connection in
                var names: [String] = []
                for try await name in try await connection.query(sql.parallelQueueNamesQuery(), logger: logger).decode(String.self) {
                    names.append(name)
                }
                return names
            }
        }
    }

    /// Makes the scope's held actions ready and notifies their queues.
    public func releaseHeldParallel(_ scope: TaskParallelScope) async throws {
        try await transaction("release held parallel actions") { [self] connection in
            var queueNames: Set<String> = []
            for try await name in try await connection.query(sql.releaseHeldParallelQuery(PostgresSchema.Scope(scope)), logger: logger)
                .decode(String.self) {
                queueNames.insert(name)
            }
            try await notify(ChangeMessage.parallel(queueNames.sorted()), on: connection)
        }
    }

    /// The plain parallel actions per queue.
    public func parallelCounts() async throws -> [String: TaskParallelCounts] {
        try await run("count the parallel actions") {
            try await withConnection { [self] connection in
                var counts: [String: TaskParallelCounts] = [:]
                for try await (name, pending, dead, oldest) in try await connection.query(sql.parallelCountsQuery(), logger: logger)
                    .decode((String, Int64, Int64, Double?).self) {
                    counts[name] = TaskParallelCounts(
                        pending: Int(pending), deadLetters: Int(dead), oldestSavedAt: oldest.map(Date.init(timeIntervalSince1970:))
                    )
                }
                return counts
            }
        }
    }

    /// Deletes a plain parallel action (see `ParallelTaskStorage.deleteParallel`).
    public func deleteParallel(key: String, collection: String) async throws -> StoredTask? {
        try await transaction("delete parallel action \(collection)/\(key)", on: writeClient) { [self] connection in
            var deleted: StoredTask?
            for try await row in try await connection.query(sql.deleteParallelQuery(collection: collection, key: key), logger: logger) {
                deleted = try PostgresSchema.task(row)
            }
            return deleted
        }
    }

    /// The plain parallel action with this key and collection (see `ParallelTaskStorage.lookupParallel`).
    public func lookupParallel(key: String, collection: String) async throws -> TaskLookup? {
        try await run("find parallel action \(collection)/\(key)") {
            try await withConnection { [self] connection in
                for try await row in try await connection.query(sql.lookupParallelQuery(collection: collection, key: key), logger: logger) {
                    let task = try PostgresSchema.task(row)
                    let state = try row.makeRandomAccess()[14].decode(Int16.self)
                    return state == 1 ? TaskLookup.deadLetter(task) : .live(task)
                }
                return nil
            }
        }
    }

    /// The plain parallel dead letters (see `ParallelTaskStorage.parallelDeadLetters`).
    public func parallelDeadLetters(queueName: String?) async throws -> [StoredTask] {
        try await run("read the parallel dead letters") {
            try await withConnection { [self] connection in
                var tasks: [StoredTask] = []
                for try await row in try await connection.query(sql.parallelDeadLettersQuery(queueName: queueName), logger: logger) {
                    tasks.append(try PostgresSchema.task(row))
                }
                return tasks
            }
        }
    }

    /// Makes a plain parallel dead letter ready again and notifies its queue.
    public func replayParallelDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await transaction("replay parallel dead letter \(collection)/\(key)", on: writeClient) { [self] connection in
            var replayed: StoredTask?
            for try await row in try await connection.query(sql.replayParallelDeadLetterQuery(collection: collection, key: key), logger: logger) {
                replayed = try PostgresSchema.task(row)
            }
            if let replayed {
                try await notify(ChangeMessage.parallel([replayed.queueName]), on: connection)
            }
            return replayed
        }
    }

    /// Deletes a plain parallel dead letter.
    public func discardParallelDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await transaction("discard parallel dead letter \(collection)/\(key)", on: writeClient) { [self] connection in
            var discarded: StoredTask?
            for try await row in try await connection.query(sql.discardParallelDeadLetterQuery(collection: collection, key: key), logger: logger) {
                discarded = try PostgresSchema.task(row)
            }
            return discarded
        }
    }
}
