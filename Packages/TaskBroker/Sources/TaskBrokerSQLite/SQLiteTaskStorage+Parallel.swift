import Foundation
import GRDB
import TaskBrokerCore

// Plain parallel actions: the rows of `taskbroker_parallel`, each claimed on its own (owner, token,
// expiry on the wall clock), never read as part of a queue.
extension SQLiteTaskStorage: ParallelTaskStorage {
    /// The columns `task(from:)` reads, from `taskbroker_parallel` (which has no pause columns).
    static let parallelColumns = """
        key, collection, queue_name, payload, position, revision, attempts, 0, NULL, \
        not_before, priority, last_failure, failed_at, trace_context
        """

    func saveParallel(_ tasks: [NewTask]) async throws -> [StoredTask] {
        guard !tasks.isEmpty else { return [] }
        return try await write(
            "save \(tasks.count) parallel action(s)",
            announcing: { saved in [.parallelReady(queueNames: Array(Set(saved.map(\.queueName))).sorted())] }
        ) { db in
            try Self.saveParallel(tasks, in: db)
        }
    }

    /// Saves inside a transaction the caller runs (`saveParallel(_:)`, `TaskTransaction`); the
    /// queues go to the change journal, for other processes' brokers.
    static func saveParallel(_ tasks: [NewTask], in db: Database) throws -> [StoredTask] {
        let now = Date().timeIntervalSince1970
        let upsert = try db.cachedStatement(sql: """
            INSERT INTO taskbroker_parallel (collection, key, queue_name, position, revision, payload, not_before, priority, saved_at, trace_context)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (collection, key) DO UPDATE SET
                queue_name = excluded.queue_name, revision = excluded.revision, payload = excluded.payload,
                not_before = excluded.not_before, priority = excluded.priority, trace_context = excluded.trace_context, state = 0, attempts = 0,
                last_failure = NULL, failed_at = NULL, owner = NULL, expires_at = 0
            RETURNING position
            """)
        var stored: [StoredTask] = []
        stored.reserveCapacity(tasks.count)
        for task in tasks {
            let revision = try nextRevision(in: db)
            let position = try Int64.fetchOne(upsert, arguments: [
                task.collection, task.key, task.queueName, revision, revision, task.payload,
                task.notBefore?.timeIntervalSince1970, task.priority, now, TaskTraceHeaders.encoded(task.traceContext),
            ]) ?? revision
            stored.append(StoredTask(
                key: task.key, collection: task.collection, queueName: task.queueName, payload: task.payload,
                position: position, revision: revision, notBefore: task.notBefore, priority: task.priority,
                traceContext: task.traceContext
            ))
        }
        try journal(Set(tasks.map(\.queueName)).sorted(), in: db)
        return stored
    }

    func claimParallel(_ scope: TaskParallelScope, limit: Int, owner: String, leaseDuration: Duration, now: Date) async throws
        -> [TaskParallelClaim]
    {
        let (condition, arguments) = Self.parallelScope(scope)
        let seconds = now.timeIntervalSince1970
        // A read first (WAL: it takes no lock): a broker with nothing to claim, woken by a change
        // to its queues, does not take the file's write lock, which other processes' writes wait for.
        let candidates = try await Self.run("look for ready parallel actions") {
            try await pool.read { db in
                try Bool.fetchOne(
                    db,
                    sql: """
                        SELECT EXISTS (SELECT 1 FROM taskbroker_parallel p
                            WHERE state = 0 AND expires_at < ? AND (not_before IS NULL OR not_before <= ?) AND \(condition))
                        """,
                    arguments: [seconds, seconds] + arguments
                ) ?? false
            }
        }
        guard candidates else { return [] }
        return try await write("claim parallel actions", announcing: { _ in [] }) { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    UPDATE taskbroker_parallel SET owner = ?, token = token + 1, expires_at = ?
                    WHERE rowid IN (
                        SELECT rowid FROM taskbroker_parallel p
                        WHERE state = 0 AND expires_at < ? AND (not_before IS NULL OR not_before <= ?) AND \(condition)
                          AND NOT EXISTS (SELECT 1 FROM taskbroker_paused z WHERE z.queue_name = p.queue_name)
                        ORDER BY priority DESC, position LIMIT ?
                    )
                    RETURNING \(Self.parallelColumns), token
                    """,
                arguments: [owner, seconds + leaseDuration.timeInterval, seconds, seconds] + arguments + [max(1, limit)]
            )
            if !rows.isEmpty { try Self.raiseOwnerExpiry(owner, to: seconds + leaseDuration.timeInterval, in: db) }
            return try rows.map { row in
                TaskParallelClaim(task: try Self.task(from: row), token: try row.decode(atIndex: 14))
            }
            .sorted { ($0.task.priority, -$0.task.position) > ($1.task.priority, -$1.task.position) }
        }
    }

    func finishParallel(_ outcomes: [TaskParallelOutcome], owner: String) async throws -> [TaskParallelClaim] {
        guard !outcomes.isEmpty else { return [] }
        defer { hub.signalCompletions() }
        return try await write("store \(outcomes.count) parallel outcome(s)", announcing: { _ in [] }) { db in
            let match = "collection = ? AND key = ? AND revision = ? AND token = ? AND owner = ?"
            let delete = try db.cachedStatement(sql: "DELETE FROM taskbroker_parallel WHERE \(match)")
            let fail = try db.cachedStatement(sql: """
                UPDATE taskbroker_parallel SET attempts = min(attempts + 1, 2147483647), state = ?, not_before = ?,
                    last_failure = ?, failed_at = ?, owner = NULL, expires_at = 0
                WHERE \(match)
                """)
            var refused: [TaskParallelClaim] = []
            for outcome in outcomes {
                let task = outcome.claim.task
                let key: StatementArguments = [task.collection, task.key, task.revision, outcome.claim.token, owner]
                switch outcome.result {
                case .completed:
                    try delete.execute(arguments: key)
                case .failed(let retryAt):
                    try fail.execute(arguments: [0, retryAt?.timeIntervalSince1970] + Self.failureArguments(task) + key)
                case .deadLettered:
                    try fail.execute(arguments: [1, task.notBefore?.timeIntervalSince1970] + Self.failureArguments(task) + key)
                case .held:
                    try fail.execute(arguments: [2, task.notBefore?.timeIntervalSince1970] + Self.failureArguments(task) + key)
                }
                if db.changesCount == 0 { refused.append(outcome.claim) }
            }
            return refused
        }
    }

    private static func failureArguments(_ task: StoredTask) -> StatementArguments {
        [task.lastFailure?.reason, task.lastFailure?.failedAt.timeIntervalSince1970]
    }

    func renewParallel(_ claims: [TaskParallelClaim], owner: String, leaseDuration: Duration) async throws -> [TaskParallelClaim] {
        guard !claims.isEmpty else { return [] }
        let expiry = Date().timeIntervalSince1970 + leaseDuration.timeInterval
        return try await write("renew \(claims.count) parallel claim(s)", announcing: { _ in [] }) { db in
            let renew = try db.cachedStatement(sql: """
                UPDATE taskbroker_parallel SET expires_at = ?
                WHERE collection = ? AND key = ? AND revision = ? AND token = ? AND owner = ?
                """)
            var lost: [TaskParallelClaim] = []
            for claim in claims {
                try renew.execute(arguments: [expiry, claim.task.collection, claim.task.key, claim.task.revision, claim.token, owner])
                if db.changesCount == 0 { lost.append(claim) }
            }
            if lost.count < claims.count { try Self.raiseOwnerExpiry(owner, to: expiry, in: db) }
            return lost
        }
    }

    func releaseParallel(_ claims: [TaskParallelClaim], owner: String) async throws {
        guard !claims.isEmpty else { return }
        let queueNames = Array(Set(claims.map(\.task.queueName))).sorted()
        _ = try await write("release \(claims.count) parallel claim(s)", announcing: { _ in [.parallelReady(queueNames: queueNames)] }) { db in
            let release = try db.cachedStatement(sql: """
                UPDATE taskbroker_parallel SET owner = NULL, expires_at = 0
                WHERE collection = ? AND key = ? AND token = ? AND owner = ?
                """)
            for claim in claims {
                try release.execute(arguments: [claim.task.collection, claim.task.key, claim.token, owner])
            }
            try Self.journal(queueNames, in: db)
            return true
        }
    }

    func nextParallelTime(_ scope: TaskParallelScope, owner: String, now: Date) async throws -> Date? {
        let (condition, arguments) = Self.parallelScope(scope)
        let seconds = now.timeIntervalSince1970
        return try await Self.run("read the parallel actions' next time") {
            try await pool.read { db in
                let notBefore = try Double.fetchOne(
                    db,
                    sql: "SELECT min(not_before) FROM taskbroker_parallel WHERE state = 0 AND not_before > ? AND \(condition)",
                    arguments: [seconds] + arguments
                )
                let expiry = try Double.fetchOne(
                    db, sql: "SELECT min(expires_at) FROM taskbroker_parallel_owner WHERE owner <> ? AND expires_at >= ?",
                    arguments: [owner, seconds]
                )
                return [notBefore, expiry].compactMap { $0 }.filter(\.isFinite).min().map { Date(timeIntervalSince1970: $0) }
            }
        }
    }

    /// Records that `owner` holds claims until `expiry` at least (see `taskbroker_parallel_owner`).
    static func raiseOwnerExpiry(_ owner: String, to expiry: Double, in db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO taskbroker_parallel_owner (owner, expires_at) VALUES (?, ?)
                ON CONFLICT (owner) DO UPDATE SET expires_at = max(expires_at, excluded.expires_at)
                """,
            arguments: [owner, expiry]
        )
    }

    func parallelQueueNames() async throws -> [String] {
        try await Self.run("list the queues of parallel actions") {
            try await pool.read { db in
                try String.fetchAll(db, sql: "SELECT DISTINCT queue_name FROM taskbroker_parallel ORDER BY queue_name")
            }
        }
    }

    func releaseHeldParallel(_ scope: TaskParallelScope) async throws {
        let (condition, arguments) = Self.parallelScope(scope)
        let dayAgo = Date().timeIntervalSince1970 - 86_400
        // A read first, as for a claim: usually nothing is held and no owner is a day old.
        let due = try await Self.run("look for held parallel actions") {
            try await pool.read { db in
                try Bool.fetchOne(
                    db,
                    sql: """
                        SELECT EXISTS (SELECT 1 FROM taskbroker_parallel WHERE state = 2 AND \(condition))
                            OR EXISTS (SELECT 1 FROM taskbroker_parallel_owner WHERE expires_at < ?)
                        """,
                    arguments: arguments + [dayAgo]
                ) ?? false
            }
        }
        guard due else { return }
        _ = try await write("release held parallel actions", announcing: { _ in [] }) { db in
            try db.execute(sql: "UPDATE taskbroker_parallel SET state = 0 WHERE state = 2 AND \(condition)", arguments: arguments)
            // Owners whose claims expired a day ago are forgotten.
            try db.execute(sql: "DELETE FROM taskbroker_parallel_owner WHERE expires_at < ?", arguments: [dayAgo])
            return true
        }
    }

    func parallelCounts() async throws -> [String: TaskParallelCounts] {
        try await Self.run("count the parallel actions") {
            try await pool.read { db in
                var counts: [String: TaskParallelCounts] = [:]
                for row in try Row.fetchAll(db, sql: """
                    SELECT queue_name, sum(state <> 1), sum(state = 1), min(CASE WHEN state <> 1 THEN saved_at END)
                    FROM taskbroker_parallel GROUP BY queue_name
                    """) {
                    let oldest = try row.decode(Double?.self, atIndex: 3)
                    counts[try row.decode(atIndex: 0)] = TaskParallelCounts(
                        pending: try row.decode(atIndex: 1), deadLetters: try row.decode(atIndex: 2),
                        oldestSavedAt: oldest.map { Date(timeIntervalSince1970: $0) }
                    )
                }
                return counts
            }
        }
    }

    func deleteParallel(key: String, collection: String) async throws -> StoredTask? {
        try await write("delete parallel action \(collection)/\(key)", announcing: { _ in [] }) { db in
            try Row.fetchOne(
                db, sql: "DELETE FROM taskbroker_parallel WHERE collection = ? AND key = ? RETURNING \(Self.parallelColumns)",
                arguments: [collection, key]
            ).map(Self.task(from:))
        }
    }

    func lookupParallel(key: String, collection: String) async throws -> TaskLookup? {
        try await Self.run("find parallel action \(collection)/\(key)") {
            try await pool.read { db in
                guard let row = try Row.fetchOne(
                    db, sql: "SELECT \(Self.parallelColumns), state FROM taskbroker_parallel WHERE collection = ? AND key = ?",
                    arguments: [collection, key]
                ) else { return nil }
                let task = try Self.task(from: row)
                return try row.decode(Int.self, atIndex: 14) == 1 ? TaskLookup.deadLetter(task) : .live(task)
            }
        }
    }

    func parallelDeadLetters(queueName: String?) async throws -> [StoredTask] {
        try await Self.run("read the parallel dead letters") {
            try await pool.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT \(Self.parallelColumns) FROM taskbroker_parallel
                        WHERE \(queueName == nil ? "" : "queue_name = ? AND ")state = 1 ORDER BY queue_name, position
                        """,
                    arguments: StatementArguments(queueName.map { [$0] } ?? [])
                ).map(Self.task(from:))
            }
        }
    }

    func replayParallelDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await write(
            "replay parallel dead letter \(collection)/\(key)",
            announcing: { replayed in replayed.map { [.parallelReady(queueNames: [$0.queueName])] } ?? [] }
        ) { db in
            guard try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM taskbroker_parallel WHERE collection = ? AND key = ? AND state = 1)",
                arguments: [collection, key]
            ) == true else { return nil }
            let revision = try Self.nextRevision(in: db)
            let replayed = try Row.fetchOne(
                db,
                sql: """
                    UPDATE taskbroker_parallel SET state = 0, attempts = 0, last_failure = NULL, failed_at = NULL, not_before = NULL,
                        owner = NULL, expires_at = 0, revision = ?
                    WHERE collection = ? AND key = ? AND state = 1
                    RETURNING \(Self.parallelColumns)
                    """,
                arguments: [revision, collection, key]
            ).map(Self.task(from:))
            if let replayed { try Self.journal([replayed.queueName], in: db) }
            return replayed
        }
    }

    func discardParallelDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await write("discard parallel dead letter \(collection)/\(key)", announcing: { _ in [] }) { db in
            try Row.fetchOne(
                db,
                sql: "DELETE FROM taskbroker_parallel WHERE collection = ? AND key = ? AND state = 1 RETURNING \(Self.parallelColumns)",
                arguments: [collection, key]
            ).map(Self.task(from:))
        }
    }

    /// The SQL condition of a scope on `queue_name`, and its arguments.
    static func parallelScope(_ scope: TaskParallelScope) -> (String, StatementArguments) {
        switch scope {
        case .prefix(let prefix):
            // The names whose first characters are the prefix's.
            return prefix.isEmpty ? ("1", []) : ("substr(queue_name, 1, length(?)) = ?", [prefix, prefix])
        case .queues(let names):
            guard !names.isEmpty else { return ("0", []) }
            return ("queue_name IN (\(Array(repeating: "?", count: names.count).joined(separator: ", ")))", StatementArguments(names))
        }
    }
}
