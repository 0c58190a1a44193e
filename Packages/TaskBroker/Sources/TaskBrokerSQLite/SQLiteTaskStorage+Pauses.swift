import Foundation
import GRDB
import TaskBrokerCore

// Queues an operator paused: the rows of `taskbroker_paused`.
extension SQLiteTaskStorage {
    /// Announced to this process's brokers, and journaled for other processes', as a change to the queues.
    func setPaused(_ paused: Bool, queues queueNames: [String]) async throws -> [String] {
        let names = Array(Set(queueNames)).sorted()
        guard !names.isEmpty else { return [] }
        return try await write(
            "\(paused ? "pause" : "resume") \(names.count) queue(s)", announcing: { changed in changed.isEmpty ? [] : [.external(queueNames: changed)] }
        ) { db in
            var changed: [String] = []
            let statement = try db.cachedStatement(
                sql: paused
                    ? "INSERT OR IGNORE INTO taskbroker_paused (queue_name) VALUES (?)"
                    : "DELETE FROM taskbroker_paused WHERE queue_name = ?"
            )
            for name in names {
                try statement.execute(arguments: [name])
                if db.changesCount > 0 { changed.append(name) }
            }
            if !changed.isEmpty { try Self.journal(changed, in: db) }
            return changed
        }
    }

    func pausedQueues(among queueNames: [String]?) async throws -> Set<String> {
        try await Self.run("read the paused queues") {
            try await pool.read { db in try Self.pausedQueues(among: queueNames, in: db) }
        }
    }

    static func pausedQueues(among queueNames: [String]?, in db: Database) throws -> Set<String> {
        // Usually none: one look at an empty table.
        guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM taskbroker_paused)") == true else { return [] }
        guard let queueNames else { return Set(try String.fetchAll(db, sql: "SELECT queue_name FROM taskbroker_paused")) }
        let statement = try db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM taskbroker_paused WHERE queue_name = ?)")
        var paused: Set<String> = []
        for name in queueNames where try Bool.fetchOne(statement, arguments: [name]) == true {
            paused.insert(name)
        }
        return paused
    }
}
