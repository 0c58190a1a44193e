// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import AsyncPrimitivesTesting
import Foundation
import PostgresNIO
import TaskBroker
import TaskBrokerPostgres
import Testing

/// Your transactions (`database.write { tx in … }`) may take as long as they like; the worker on
/// the same `TaskDatabase` must still renew its leases in time. When they shared one pool, two
/// long transactions on a pool of two left the renewal waiting for a connection, the lease
/// expired, and another worker ran the action that still ran here: one action on two workers at
/// once. Your transactions have a pool of their own, and renewals one of theirs.
@Suite(.timeLimit(.minutes(3)))
struct PostgresUserTransactionTests {
    /// Something of the caller's that its task carries (a request's id, a trace context).
    enum RequestContext {
        @TaskLocal static var id: String?
    }

    /// A closure that does not await resolves to SQLite's `write` (its closure is synchronous): on
    /// a PostgreSQL database that is a typed error that says how to pick PostgreSQL's, and nothing
    /// of the closure runs.
    @Test func aSynchronousWriteClosureOnPostgreSQLIsATypedErrorThatNamesTheFix() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let ran = EventCollector<Bool>()
        let error = await #expect(throws: TaskBrokerError.self) {
            try await database.write { _ in ran.record(true) }
        }
        #expect(error?.code == .unsupported)
        #expect(error?.message.contains("(tx: PostgresTaskTransaction) in") == true)
        #expect(ran.count == 0)
    }

    /// Your transaction's closure runs with the task-local values of the task that called `write`
    /// (a save in it reads the trace context from them), whatever task the storage runs it in.
    @Test func aWriteClosureSeesTheCallersTaskLocalValues() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let seen = try await RequestContext.$id.withValue("request-7") {
            try await database.write { (tx: PostgresTaskTransaction) in
                try await tx.execute("SELECT 1")
                return RequestContext.id
            }
        }
        #expect(seen == "request-7")
        #expect(try await database.write { (_: PostgresTaskTransaction) in RequestContext.id } == nil)
    }

    @Test func longUserTransactionsDoNotCostTheWorkerItsLease() async throws {
        let store = try TestStore(.postgres)
        var configuration = try store.postgresConfiguration(leaseDuration: .seconds(2))
        configuration.poolSize = 2
        configuration.transactionPoolSize = 2
        let worker = try await TaskDatabase.postgres(configuration: configuration)
        let admin = try await store.open(leaseDuration: .seconds(2))
        let handler = HeldHandler()
        let broker = try await TaskQueueBroker.setup(database: worker, name: "crash", handler: handler)
        try await worker.save(CrashAction(key: "held", queueName: "crash-q", index: 0))
        #expect(await handler.started.values(count: 1) == ["held"])
        let granted = try #require(try await Self.lease(of: "crash-q", schema: store.schema, asking: admin))

        // The test's own transaction holds a lock that both of the worker's transactions then wait for.
        let lockTaken = EventCollector<Bool>()
        let unlock = EventCollector<Bool>()
        let holder = Task {
            try await admin.write { tx in
                try await tx.execute("SELECT pg_advisory_xact_lock(7707)")
                lockTaken.record(true)
                _ = await unlock.values(count: 1)
            }
        }
        _ = await lockTaken.values(count: 1)
        let userTransactions = (0..<2).map { _ in
            Task { try await worker.write { tx in try await tx.execute("SELECT pg_advisory_xact_lock(7707)") } }
        }
        try await Self.waitUntilWaitingForTheLock(2, asking: admin)

        // Another worker process of the same pool, ready to take the queue once the lease ends.
        let directory = try TemporaryDirectory()
        let other = try CrashHelperRun(arguments: ["pg-worker", try PostgresTestServer.url(), store.schema, directory.path("stamps")])
        #expect(await other.line(after: 0) == "ready")
        // Until half a lease past the first lease's end, by the server's clock.
        try await admin.write { tx in
            try await tx.execute("SELECT pg_sleep_until(to_timestamp(\(granted.expiresAt + 1)))")
        }
        let later = try #require(try await Self.lease(of: "crash-q", schema: store.schema, asking: admin))
        #expect(later.owner == granted.owner && later.epoch == granted.epoch, "the worker still holds its lease")
        #expect(later.expiresAt > granted.expiresAt + 1, "renewed while both transactions held their pool")

        unlock.record(true)
        try await holder.value
        for transaction in userTransactions { try await transaction.value }
        handler.release.record(true)
        await broker.shutdown()
        await other.finish()
        let stamps = (try? String(contentsOfFile: directory.path("stamps"), encoding: .utf8)) ?? ""
        #expect(!stamps.contains("S held "), "the other worker never ran the held action")
        #expect(try await admin.snapshot().isEmpty)
    }

    /// The lease row of `queue`: its owner, epoch and end (seconds since 1970, the server's clock).
    static func lease(of queue: String, schema: String, asking database: TaskDatabase) async throws -> (owner: String?, epoch: Int64, expiresAt: Double)? {
        try await database.write { tx in
            let rows = try await tx.query(PostgresQuery(unsafeSQL: """
                SELECT owner, epoch, extract(epoch FROM expires_at)::float8 FROM "\(schema)".queue WHERE name = '\(queue)'
                """))
            var lease: (String?, Int64, Double)?
            for try await row in rows.decode((String?, Int64, Double).self) { lease = row }
            return lease
        }
    }

    /// Waits until `count` sessions wait for the test's advisory lock.
    static func waitUntilWaitingForTheLock(_ count: Int, asking database: TaskDatabase) async throws {
        while true {
            let waiting = try await database.write { tx in
                let rows = try await tx.query(
                    "SELECT count(*)::int8 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock(7707)%'"
                )
                var waiting = 0
                for try await value in rows.decode(Int64.self) { waiting = Int(value) }
                return waiting
            }
            if waiting >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
#endif
