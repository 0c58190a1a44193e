import Foundation
import GRDB
import TaskBrokerCore

// Dead letters: rows of `taskbroker_action` whose state is 1, never read as part of their queue.
extension SQLiteTaskStorage {
    func deadLetters(queueName: String?) async throws -> [StoredTask] {
        try await Self.run("read the dead letters") {
            try await pool.read { db in
                let rows = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT \(Self.selectedColumns) FROM taskbroker_action
                        WHERE \(queueName == nil ? "" : "queue_name = ? AND ")\(Self.isDeadLetter)
                        ORDER BY queue_name, position
                        """,
                    arguments: StatementArguments(queueName.map { [$0] } ?? [])
                )
                var tasks: [StoredTask] = []
                while let row = try rows.next() {
                    tasks.append(try Self.task(from: row))
                }
                return tasks
            }
        }
    }

    /// A new revision, as a save gets; the queue is announced as saved into (this process's
    /// brokers, and through the change journal, other processes').
    func replayDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await write("replay dead letter \(collection)/\(key)", announcing: { replayed in replayed.map { [.saved($0)] } ?? [] }) { db in
            guard try Bool.fetchOne(
                db,
                sql: "SELECT EXISTS (SELECT 1 FROM taskbroker_action WHERE collection = ? AND key = ? AND \(Self.isDeadLetter))",
                arguments: [collection, key]
            ) == true else { return nil }
            let revision = try Self.nextRevision(in: db)
            let replayed = try Row.fetchOne(
                db,
                sql: """
                    UPDATE taskbroker_action SET state = 0, attempts = 0, pause_kind = 0, pause_until = NULL,
                        last_failure = NULL, failed_at = NULL, revision = ?
                    WHERE collection = ? AND key = ? AND state = 1
                    RETURNING \(Self.selectedColumns)
                    """,
                arguments: [revision, collection, key]
            ).map(Self.task(from:))
            if let replayed { try Self.journal([replayed.queueName], in: db) }
            return replayed
        }
    }

    func lookup(key: String, collection: String) async throws -> TaskLookup? {
        try await Self.run("find action \(collection)/\(key)") {
            try await pool.read { db in
                guard let row = try Row.fetchOne(
                    db,
                    sql: "SELECT \(Self.selectedColumns), state FROM taskbroker_action WHERE collection = ? AND key = ? AND \(Self.isLive)",
                    arguments: [collection, key]
                ) else { return nil }
                let task = try Self.task(from: row)
                return try row.decode(Int.self, atIndex: 14) == 1 ? .deadLetter(task) : .live(task)
            }
        }
    }

    func discardDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await write("discard dead letter \(collection)/\(key)", announcing: { _ in [] }) { db in
            try Row.fetchOne(
                db,
                sql: """
                    DELETE FROM taskbroker_action WHERE collection = ? AND key = ? AND \(Self.isDeadLetter)
                    RETURNING \(Self.selectedColumns)
                    """,
                arguments: [collection, key]
            ).map(Self.task(from:))
        }
    }

    /// The error of a revision counter at its largest value: only a change made outside
    /// TaskBroker puts it there.
    static var revisionsExhausted: TaskBrokerError {
        TaskBrokerError(
            code: .corruptDatabase,
            message: "The database's revision counter (taskbroker_sequence) is at its largest value and cannot "
                + "number another save: the file was changed outside TaskBroker. Restore it from a backup."
        )
    }

    /// Draws the next revision from the sequence.
    static func nextRevision(in db: Database) throws -> Int64 {
        let sequence = try Int64.fetchOne(db, sql: "SELECT value FROM taskbroker_sequence WHERE id = 1") ?? 0
        guard sequence < Int64.max else { throw revisionsExhausted }
        try db.execute(sql: "UPDATE taskbroker_sequence SET value = ? WHERE id = 1", arguments: [sequence + 1])
        return sequence + 1
    }

    /// The number of dead letters per queue.
    static func deadLetterCounts(in db: Database) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try Row.fetchAll(
            db, sql: "SELECT queue_name, count(*) FROM taskbroker_action WHERE \(isDeadLetter) GROUP BY queue_name"
        ) {
            counts[try row.decode(atIndex: 0)] = try row.decode(atIndex: 1)
        }
        return counts
    }
}
