#if Postgres
import PostgresNIO
import TaskBroker
import TaskBrokerPostgres

/// The tool's own SQL on PostgreSQL, through postgres-nio, in the broker's transactions. The
/// demo's ledger lives in the broker's schema, so workers of one schema share one demo.
struct PostgresBackend: StoreBackend {
    let database: TaskDatabase
    /// TaskBroker's schema (validated by `TaskDatabase.PostgresConfiguration`: lowercase letters,
    /// digits and `_`), so it is safe to splice into SQL.
    let schema: String

    private var table: String { "\"\(schema)\".queuekit_demo" }

    func loadLedger() async throws -> DemoLedger? {
        try await write { tx -> DemoLedger? in
            guard try await exists(tx) else { return nil }
            let rows = try await tx.query("""
                SELECT seed, total, users, transient_rate, permanent_rate, max_attempts, enqueued, purged, runs
                FROM \(unescaped: table) WHERE id = 1
                """)
            for try await row in rows.decode((String, Int, Int, Double, Double, Int, Int, Int, Int).self) {
                return DemoLedger(
                    workload: Workload(
                        seed: UInt64(row.0) ?? 0, total: row.1, users: row.2, transientRate: row.3,
                        permanentRate: row.4, maxAttempts: row.5
                    ),
                    enqueued: row.6, purged: row.7, runs: row.8
                )
            }
            return nil
        }
    }

    func createLedger(for workload: Workload) async throws {
        let table = table
        try await write { tx in
            // Workers starting together would race on CREATE TABLE IF NOT EXISTS.
            try await tx.execute("SELECT pg_advisory_xact_lock(hashtext(\(table)))")
            try await tx.execute("""
                CREATE TABLE IF NOT EXISTS \(unescaped: table) (
                    id integer PRIMARY KEY CHECK (id = 1),
                    seed text NOT NULL,
                    total bigint NOT NULL,
                    users bigint NOT NULL,
                    transient_rate double precision NOT NULL,
                    permanent_rate double precision NOT NULL,
                    max_attempts bigint NOT NULL,
                    enqueued bigint NOT NULL,
                    purged bigint NOT NULL DEFAULT 0,
                    runs bigint NOT NULL DEFAULT 0
                )
                """)
            try await tx.execute("""
                INSERT INTO \(unescaped: table)
                    (id, seed, total, users, transient_rate, permanent_rate, max_attempts, enqueued, purged, runs)
                VALUES (1, \(String(workload.seed)), \(workload.total), \(workload.users), \(workload.transientRate),
                        \(workload.permanentRate), \(workload.maxAttempts), 0, 0, 0)
                ON CONFLICT (id) DO UPDATE SET
                    seed = excluded.seed, total = excluded.total, users = excluded.users,
                    transient_rate = excluded.transient_rate, permanent_rate = excluded.permanent_rate,
                    max_attempts = excluded.max_attempts, enqueued = 0, purged = 0, runs = 0
                """)
        }
    }

    func enqueue(_ workload: Workload, from: Int, to: Int) async throws {
        let table = table
        try await write { tx in
            try await tx.save((from..<to).map(workload.action(at:)))
            try await tx.execute("UPDATE \(unescaped: table) SET enqueued = \(to) WHERE id = 1")
        }
    }

    func add(_ amount: Int, to counter: DemoLedger.Counter) async throws {
        let table = table
        try await write { tx in
            guard try await exists(tx) else { return }
            try await tx.execute(
                "UPDATE \(unescaped: table) SET \(unescaped: counter.rawValue) = \(unescaped: counter.rawValue) + \(amount) WHERE id = 1"
            )
        }
    }

    func deleteLedger() async throws {
        let table = table
        try await write { tx in
            guard try await exists(tx) else { return }
            try await tx.execute("DELETE FROM \(unescaped: table)")
        }
    }

    /// Whether the ledger's table exists.
    private func exists(_ tx: PostgresTaskTransaction) async throws -> Bool {
        let rows = try await tx.query("SELECT to_regclass(\(table)) IS NOT NULL")
        for try await exists in rows.decode(Bool.self) {
            return exists
        }
        return false
    }

    /// Runs `body` in one of the broker's transactions; PostgreSQL's errors become one line.
    private func write<T: Sendable>(_ body: @escaping @Sendable (PostgresTaskTransaction) async throws -> T) async throws -> T {
        do {
            return try await database.write(body)
        } catch let error as PSQLError {
            throw StoreBackendError(message: error.serverInfo?[.message] ?? "\(error.code)")
        }
    }
}
#endif
