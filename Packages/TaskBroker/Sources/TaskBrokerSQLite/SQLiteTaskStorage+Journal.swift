import Foundation
import GRDB
import TaskBrokerCore

// The change journal (read by other processes' ``ExternalChangeWatcher``) and the table of the
// brokers set up on the file.
extension SQLiteTaskStorage {
    /// How many journal entries are kept; a watcher further behind rereads every queue name.
    static let journalLength: Int64 = 16_384

    /// Appends the queues a write changed to the change journal, in the write's transaction.
    static func journal(_ queueNames: some Sequence<String>, in db: Database) throws {
        let statement = try db.cachedStatement(sql: "INSERT INTO taskbroker_change (queue_name, origin) VALUES (?, ?)")
        var first: Int64 = 0
        var last: Int64 = 0
        for queueName in queueNames {
            try statement.execute(arguments: [queueName, ProcessIdentity.token])
            last = db.lastInsertedRowID
            if first == 0 { first = last }
        }
        // Pruned each time the journal passes a multiple of 1,024 entries.
        if last > 0, (first - 1) / 1024 != last / 1024 {
            try db.execute(sql: "DELETE FROM taskbroker_change WHERE seq <= ?", arguments: [last - journalLength])
        }
    }

    /// What `readJournal(after:)` found.
    struct JournalRead {
        var entries: [(queueName: String, origin: String)]
        /// The newest entry read (or `after` when there is none).
        var latest: Int64
        /// Entries past `after` were pruned before they were read.
        var fellBehind: Bool
    }

    /// The newest journal entry, or 0.
    func journalHead() async throws -> Int64 {
        try await Self.run("read the change journal") {
            try await pool.read { db in
                try Int64.fetchOne(db, sql: "SELECT coalesce(max(seq), 0) FROM taskbroker_change") ?? 0
            }
        }
    }

    /// The journal entries after `after`, blocking the calling thread (the watcher's own queue).
    func readJournal(after: Int64) throws -> JournalRead {
        try pool.read { db in
            let oldest = try Int64.fetchOne(db, sql: "SELECT min(seq) FROM taskbroker_change")
            var read = JournalRead(entries: [], latest: after, fellBehind: false)
            if let oldest, oldest > after + 1 {
                read.fellBehind = true
            }
            let rows = try Row.fetchCursor(
                db, sql: "SELECT seq, queue_name, origin FROM taskbroker_change WHERE seq > ? ORDER BY seq", arguments: [after]
            )
            while let row = try rows.next() {
                // Throwing reads: a value of the wrong type is an error, not a trap.
                read.latest = try row.decode(atIndex: 0)
                read.entries.append((try row.decode(atIndex: 1), try row.decode(atIndex: 2)))
            }
            return read
        }
    }

    /// `queueNames()` for a thread of its own.
    func queueNamesBlocking() throws -> [String] {
        try pool.read { db in
            try String.fetchAll(db, sql: "SELECT DISTINCT queue_name FROM taskbroker_action WHERE \(Self.isLive) ORDER BY queue_name")
        }
    }

    /// Records a broker set up on the file and returns the others recorded (some may have stopped:
    /// their lock tells).
    func recordBroker(_ claim: BrokerClaim) async throws -> [BrokerClaim] {
        try await Self.run("record broker \(claim.name)") {
            try await pool.write { db in
                try db.execute(
                    sql: "INSERT OR REPLACE INTO taskbroker_broker (name, prefix_claim) VALUES (?, ?)",
                    arguments: [claim.name, claim.isPrefixClaim]
                )
                return try Row.fetchAll(db, sql: "SELECT name, prefix_claim FROM taskbroker_broker WHERE name <> ?", arguments: [claim.name])
                    // Throwing reads: GRDB's subscripts trap on a value of another type in the file.
                    .map { BrokerClaim(name: try $0.decode(atIndex: 0), isPrefixClaim: try $0.decode(atIndex: 1)) }
            }
        }
    }
}
