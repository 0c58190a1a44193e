import Foundation
import GRDB
import Synchronization
import TaskBrokerCore

// Reads that a broker makes as it runs: pages of queue names and the actions of many queues at once.
extension SQLiteTaskStorage {
    /// A page of queue names: one probe of the `(queue_name, position)` index per name (a loose
    /// index scan), however many actions each queue holds.
    func queueNames(after name: String?, limit: Int) async throws -> [String] {
        try await Self.run("list queues") {
            try await pool.read { db in
                let live = try Self.hasLoggedCompletions(db) ? " AND \(Self.isLive)" : ""
                let first = name == nil ? ">=" : ">"
                return try String.fetchAll(
                    db,
                    sql: """
                        WITH RECURSIVE listed(name) AS (
                            SELECT (SELECT min(queue_name) FROM taskbroker_action WHERE queue_name \(first) ?\(live))
                            UNION ALL
                            SELECT (SELECT min(queue_name) FROM taskbroker_action WHERE queue_name > listed.name\(live))
                            FROM listed WHERE listed.name IS NOT NULL
                            LIMIT ?
                        )
                        SELECT name FROM listed WHERE name IS NOT NULL
                        """,
                    arguments: [name ?? "", max(1, limit)]
                )
            }
        }
    }

    /// One range scan of the `(not_before, position)` index, which holds only actions saved to run later.
    func scheduled(after cursor: TaskScheduleEntry?, through: Date, limit: Int) async throws -> [TaskScheduleEntry] {
        try await Self.run("read the schedule") {
            try await pool.read { db in
                let rows = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT queue_name, not_before, position FROM taskbroker_action
                        WHERE not_before IS NOT NULL AND (not_before, position) > (?, ?) AND not_before <= ? AND \(Self.isReady)
                        ORDER BY not_before, position LIMIT ?
                        """,
                    arguments: [
                        cursor?.notBefore.timeIntervalSince1970 ?? -Double.greatestFiniteMagnitude, cursor?.position ?? .min,
                        through.timeIntervalSince1970, max(1, limit),
                    ]
                )
                var entries: [TaskScheduleEntry] = []
                while let row = try rows.next() {
                    do {
                        entries.append(TaskScheduleEntry(
                            queueName: try row.decode(atIndex: 0),
                            notBefore: try Self.date(try row.decode(atIndex: 1), of: "not-before time"),
                            position: try row.decode(atIndex: 2)
                        ))
                    } catch {
                        throw Self.wrongType(error)
                    }
                }
                return entries
            }
        }
    }

    /// The first entry of the `(not_before, position)` index after `date` that is stored and ready.
    func nextNotBefore(after date: Date) async throws -> Date? {
        try await Self.run("read the schedule") {
            try await pool.read { db in
                try Double.fetchOne(
                    db,
                    sql: """
                        SELECT not_before FROM taskbroker_action
                        WHERE not_before IS NOT NULL AND not_before > ? AND \(Self.isReady)
                        ORDER BY not_before LIMIT 1
                        """,
                    arguments: [date.timeIntervalSince1970]
                ).flatMap { $0.isFinite ? Date(timeIntervalSince1970: $0) : nil }
            }
        }
    }

    func tasks(inQueues queueNames: [String], after positions: [String: Int64], limit: Int) async throws -> [String: [StoredTask]] {
        let result = Mutex<(tasks: [String: [StoredTask]], failure: TaskBrokerError?)>(([:], nil))
        try await readQueues(queueNames, after: positions, limit: limit, failed: { _, error in
            result.withLock { $0.failure = $0.failure ?? error }
        }) { queueName, tasks in
            result.withLock { $0.tasks[queueName] = tasks }
        }
        let (tasks, failure) = result.withLock { ($0.tasks, $0.failure) }
        if let failure { throw failure }
        return tasks
    }

    /// The most queue names one statement of `readQueues(_:after:limit:failed:_:)` binds.
    static let queuesPerRead = 256

    /// Reads the stored actions of many queues in one read transaction and hands each queue's
    /// actions, in position order, to `body` as soon as that queue is read. A queue with no stored
    /// action is not reported.
    ///
    /// With a `limit`, one statement per queue reads its first `limit` live rows (after the
    /// queue's position in `positions`) through the `(queue_name, position)` index: the read costs
    /// the same whatever the queue's backlog.
    /// Without one, one statement per `queuesPerRead` names reads the queues whole
    /// (`tasks(inQueue:)` per queue gives the same result, but each of its statements skips the
    /// logged completions on its own: at startup, with many queues and a long log, that was most
    /// of the loading time).
    /// A queue with a row that does not decode (a value of the wrong type: a hand edit, damage)
    /// goes to `failed` instead, and the scan goes on with the other queues.
    func readQueues(
        _ queueNames: [String], after positions: [String: Int64], limit: Int?,
        failed: @escaping @Sendable (String, TaskBrokerError) -> Void,
        _ body: @escaping @Sendable (String, [StoredTask]) -> Void
    ) async throws {
        guard !queueNames.isEmpty else { return }
        try await Self.run("read \(queueNames.count) queue(s)") {
            try await pool.read { db in
                if let limit {
                    let statement = try db.cachedStatement(
                        sql: """
                            SELECT \(Self.selectedColumns) FROM taskbroker_action
                            WHERE queue_name = ? AND position > ? AND \(Self.isReady)
                            ORDER BY position LIMIT ?
                            """
                    )
                    for name in queueNames {
                        let rows = try Row.fetchCursor(statement, arguments: [name, positions[name] ?? .min, max(1, limit)])
                        try Self.report(rows, failed: failed, body)
                    }
                    return
                }
                var start = 0
                while start < queueNames.count {
                    let names = queueNames[start..<min(start + Self.queuesPerRead, queueNames.count)]
                    start += names.count
                    let rows = try Row.fetchCursor(
                        db,
                        sql: """
                            SELECT \(Self.selectedColumns) FROM taskbroker_action
                            WHERE queue_name IN (\(Array(repeating: "?", count: names.count).joined(separator: ", ")))
                            AND \(Self.isReady)
                            ORDER BY queue_name, position
                            """,
                        arguments: StatementArguments(Array(names))
                    )
                    try Self.report(rows, failed: failed, body)
                }
            }
        }
    }

    /// Hands the rows of a cursor ordered by queue name and position to `body`, one queue at a
    /// time, and a queue with a row that does not decode to `failed`.
    private static func report(
        _ rows: RowCursor, failed: (String, TaskBrokerError) -> Void, _ body: (String, [StoredTask]) -> Void
    ) throws {
        var current: (name: String, tasks: [StoredTask])?
        var failedQueue: String?
        while let row = try rows.next() {
            let task: StoredTask
            do throws(TaskBrokerError) {
                task = try Self.task(from: row)
            } catch {
                // Only its queue fails (its rows come one after another); a row whose queue name
                // does not decode fails the read.
                guard let name = try? row.decode(String.self, atIndex: 2) else { throw error }
                if let queue = current, queue.name != name { body(queue.name, queue.tasks) }
                current = nil
                if failedQueue != name { failed(name, error) }
                failedQueue = name
                continue
            }
            if task.queueName == failedQueue { continue }
            if let queue = current, queue.name != task.queueName {
                body(queue.name, queue.tasks)
                current = nil
            }
            if current == nil { current = (task.queueName, []) }
            current?.tasks.append(task)
        }
        if let queue = current { body(queue.name, queue.tasks) }
    }
}
