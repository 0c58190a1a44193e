import GRDB
import TaskBroker

/// The tool's own SQL on an SQLite file, through GRDB, in the broker's transactions.
struct SQLiteBackend: StoreBackend {
    let database: TaskDatabase

    private static let createTable = """
        CREATE TABLE IF NOT EXISTS queuekit_demo (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            seed TEXT NOT NULL,
            total INTEGER NOT NULL,
            users INTEGER NOT NULL,
            transient_rate REAL NOT NULL,
            permanent_rate REAL NOT NULL,
            max_attempts INTEGER NOT NULL,
            enqueued INTEGER NOT NULL,
            purged INTEGER NOT NULL DEFAULT 0,
            runs INTEGER NOT NULL DEFAULT 0
        )
        """

    func loadLedger() async throws -> DemoLedger? {
        try await write { db -> DemoLedger? in
            try db.execute(sql: Self.createTable)
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM queuekit_demo WHERE id = 1") else { return nil }
            let seed: String = row["seed"]
            return DemoLedger(
                workload: Workload(
                    seed: UInt64(seed) ?? 0, total: row["total"], users: row["users"],
                    transientRate: row["transient_rate"], permanentRate: row["permanent_rate"],
                    maxAttempts: row["max_attempts"]
                ),
                enqueued: row["enqueued"], purged: row["purged"], runs: row["runs"]
            )
        }
    }

    func createLedger(for workload: Workload) async throws {
        try await write { db in
            try db.execute(sql: Self.createTable)
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO queuekit_demo
                        (id, seed, total, users, transient_rate, permanent_rate, max_attempts, enqueued)
                    VALUES (1, ?, ?, ?, ?, ?, ?, 0)
                    """,
                arguments: [
                    String(workload.seed), workload.total, workload.users, workload.transientRate,
                    workload.permanentRate, workload.maxAttempts,
                ]
            )
        }
    }

    func enqueue(_ workload: Workload, from: Int, to: Int) async throws {
        try await database.write { tx in
            for index in from..<to {
                try tx.save(workload.action(at: index))
            }
            try tx.db.execute(sql: "UPDATE queuekit_demo SET enqueued = ? WHERE id = 1", arguments: [to])
        }
    }

    func add(_ amount: Int, to counter: DemoLedger.Counter) async throws {
        try await write { db in
            try db.execute(sql: Self.createTable)
            try db.execute(
                sql: "UPDATE queuekit_demo SET \(counter.rawValue) = \(counter.rawValue) + ? WHERE id = 1",
                arguments: [amount]
            )
        }
    }

    func deleteLedger() async throws {
        try await write { db in
            try db.execute(sql: Self.createTable)
            try db.execute(sql: "DELETE FROM queuekit_demo")
        }
    }

    /// Runs `body` in one of the broker's transactions; GRDB's errors become one line.
    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await database.write { tx in try body(tx.db) }
        } catch let error as DatabaseError {
            throw StoreBackendError(message: error.message ?? "\(error.resultCode)")
        }
    }
}
