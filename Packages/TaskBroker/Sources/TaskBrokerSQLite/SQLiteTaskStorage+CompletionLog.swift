import Foundation
import GRDB
import Synchronization
import TaskBrokerCore

// The completion log: a success is committed as its revision in `taskbroker_done` instead of a
// delete from `taskbroker_action`; every read treats a logged revision as deleted, and the log
// is applied in bulk once it is long.
extension SQLiteTaskStorage {
    /// How many logged completions trigger a compaction (applied in the same transaction).
    /// A long log costs reads nothing (they skip it by revision); a short one makes compactions
    /// frequent, and each rewrites the pages of the rows it deletes: 16,384 measured best in the
    /// burn-down benchmark (4,096 gave about 15% less).
    static let compactionThreshold = 16_384

    /// - Returns: The queues whose failed action was no longer stored as it ran (see `finish(_:logged:in:)`).
    func commit(_ outcomes: [TaskOutcome]) async throws -> Set<String> {
        let known = loggedCompletions.withLock { $0 }
        do {
            let (logged, outdated) = try await pool.write { db in try Self.finish(outcomes, logged: known, in: db) }
            loggedCompletions.withLock { $0 = logged }
            return outdated
        } catch {
            loggedCompletions.withLock { $0 = nil }
            throw error
        }
    }

    /// - Returns: The queues whose failed action was no longer stored as it ran (see `finish(_:logged:in:)`).
    func commitBlocking(_ outcomes: [TaskOutcome]) throws -> Set<String> {
        let known = loggedCompletions.withLock { $0 }
        do {
            let (logged, outdated) = try pool.write { db in try Self.finish(outcomes, logged: known, in: db) }
            loggedCompletions.withLock { $0 = logged }
            return outdated
        } catch {
            loggedCompletions.withLock { $0 = nil }
            throw error
        }
    }

    /// Stores outcomes, compacting the log once it is long.
    ///
    /// - Parameters:
    ///   - logged: How many completions the log held before, if known.
    /// - Returns: How many completions the log holds after, and the queues of failures whose
    ///   action is no longer stored in the revision that ran (deleted or replaced, by another
    ///   process say): nothing was stored for them, and a broker that kept the action as its
    ///   queue's head would run it again.
    static func finish(_ outcomes: [TaskOutcome], logged: Int?, in db: Database) throws -> (logged: Int, outdated: Set<String>) {
        // A success appends to the completion log: whether the revision is still stored does not
        // matter (a logged revision that is gone or replaced is simply never read). Successes go
        // in multi-row INSERTs of up to `logChunk` rows: one statement run per chunk.
        var completed: [StoredTask] = []
        completed.reserveCapacity(outcomes.count)
        var outdated: Set<String> = []
        // The attempt count is written as a value, not incremented: storing the same outcome twice
        // (a commit retried after a failure whose fate was unknown) counts it once.
        let fail = try db.cachedStatement(sql: """
            UPDATE taskbroker_action SET attempts = ?, pause_kind = ?, pause_until = ?, last_failure = ?, failed_at = ?, state = ?
            WHERE collection = ? AND key = ? AND revision = ?
            """)
        func store(_ task: StoredTask, pause: TaskPause?, state: Int) throws {
            let (kind, until) = columns(for: pause)
            try fail.execute(arguments: [
                task.nextAttempt, kind, until, task.lastFailure?.reason, task.lastFailure?.failedAt.timeIntervalSince1970, state,
                task.collection, task.key, task.revision,
            ])
            if db.changesCount == 0 { outdated.insert(task.queueName) }
        }
        for outcome in outcomes {
            switch outcome {
            case .completed(let task, _):
                completed.append(task)
            case .failed(let task, let pause, _):
                try store(task, pause: pause, state: 0)
            case .deadLettered(let task, _):
                try store(task, pause: nil, state: 1)
            }
        }
        var count = try logged ?? Int.fetchOne(db, sql: "SELECT count(*) FROM taskbroker_done") ?? 0
        var start = 0
        while start < completed.count {
            let end = min(start + logChunk, completed.count)
            let statement = try db.cachedStatement(sql: logSQL(rows: end - start))
            var values: [(any DatabaseValueConvertible)?] = []
            values.reserveCapacity(end - start)
            for task in completed[start..<end] {
                values.append(task.revision)
            }
            statement.setUncheckedArguments(StatementArguments(values))
            try statement.execute()
            count += db.changesCount
            start = end
        }
        guard count >= compactionThreshold else { return (count, outdated) }
        try compact(in: db)
        return (0, outdated)
    }

    /// The most rows one INSERT into the completion log carries.
    static let logChunk = 64

    /// `INSERT OR IGNORE INTO taskbroker_done (revision) VALUES (?), …` with `rows` rows (a
    /// revision logged twice is logged once).
    static func logSQL(rows: Int) -> String {
        "INSERT OR IGNORE INTO taskbroker_done (revision) VALUES "
            + Array(repeating: "(?)", count: rows).joined(separator: ", ")
    }

    /// Applies the completion log: deletes the logged revisions that are still stored (found
    /// through the `revision` index, in revision order), then empties the log.
    static func compact(in db: Database) throws {
        try db.execute(sql: """
            DELETE FROM taskbroker_action WHERE revision IN (SELECT revision FROM taskbroker_done);
            DELETE FROM taskbroker_done;
            """)
    }

    /// Whether the completion log has entries (reads may then skip the filter).
    static func hasLoggedCompletions(_ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM taskbroker_done)") ?? true
    }

    /// The condition of a stored, not yet completed row of `taskbroker_action`.
    static let isLive = "revision NOT IN (SELECT revision FROM taskbroker_done)"

    /// The condition of a row that its queue runs: stored, not completed, not a dead letter.
    static let isReady = "state = 0 AND \(isLive)"

    /// The condition of a dead letter.
    static let isDeadLetter = "state = 1 AND \(isLive)"
}
