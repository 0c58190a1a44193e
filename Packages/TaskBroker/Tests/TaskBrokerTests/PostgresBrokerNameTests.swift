// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Foundation
import PostgresNIO
import TaskBroker
import TaskBrokerPostgres
import Testing

/// A broker claims the queues whose names start with its own. Two brokers whose names are
/// prefixes of each other ("crash" and "crash-mail") would take each other's queues, and with
/// another action type fail to decode them and pause them: they are refused across processes as
/// within one. Brokers of one name are workers of one pool and are never refused. A process that
/// shuts down forgets its brokers at once; one that dies leaves a record that expires after three
/// heartbeats of its change feed.
@Suite(.timeLimit(.minutes(3)))
struct PostgresBrokerNameTests {
    @Test func brokerNamesThatOverlapAreRefusedAcrossProcesses() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let directory = try TemporaryDirectory()
        let worker = try CrashHelperRun(arguments: ["pg-worker", try PostgresTestServer.url(), store.schema, directory.path("stamps")])
        #expect(await worker.line(after: 0) == "ready")

        for overlapping in ["crash-mail", "cra"] {
            await #expect(throws: TaskBrokerError.self, "\(overlapping) overlaps the other process's crash") {
                _ = try await TaskQueueBroker.setup(database: database, name: overlapping, handler: RecordingHandler<TestAction>())
            }
        }
        // A second worker of the pool, and a name that overlaps nothing.
        let sameName = try await TaskQueueBroker.setup(database: database, name: "crash", handler: RecordingHandler<CrashAction>())
        await sameName.shutdown()
        let other = try await TaskQueueBroker.setup(database: database, name: "other", handler: RecordingHandler<TestAction>())
        // The other way round: a process whose broker overlaps this one's is refused.
        let refused = try CrashHelperRun(arguments: ["pg-worker", try PostgresTestServer.url(), store.schema, directory.path("refused"), "oth"])
        let said = await refused.line(after: 0)
        #expect(said.hasPrefix("error") && said.contains("queueAlreadyClaimed") && said.contains("\"other\""), "the helper said \(said)")
        await refused.waitForExit()

        // Shut down: its name is free at once.
        await worker.finish()
        let after = try await TaskQueueBroker.setup(database: database, name: "crash-mail", handler: RecordingHandler<TestAction>())
        await after.shutdown()
        await other.shutdown()
    }

    @Test func theNameOfAProcessThatDiedIsFreeOnceItsRecordExpires() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let directory = try TemporaryDirectory()
        let worker = try CrashHelperRun(
            arguments: ["pg-worker", try PostgresTestServer.url(), store.schema, directory.path("stamps"), "zeta"],
            environment: ["QUEUEKIT_HELPER_HEARTBEAT_MS": "3000"]
        )
        #expect(await worker.line(after: 0) == "ready")
        await worker.kill()
        // Renewed at most 3 s before the kill for 9 s: alive for 6 s more at least (3 s was once
        // too short for the setup below on a loaded machine).
        await #expect(throws: TaskBrokerError.self, "the dead process's record is still alive") {
            _ = try await TaskQueueBroker.setup(database: database, name: "zeta-x", handler: RecordingHandler<TestAction>())
        }
        // Until its record's end (three heartbeats after the last one), by the server's clock.
        try await database.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "SELECT pg_sleep_until(max(expires_at)) FROM \"\(store.schema)\".broker WHERE name = 'zeta'"))
        }
        let after = try await TaskQueueBroker.setup(database: database, name: "zeta-x", handler: RecordingHandler<TestAction>())
        await after.shutdown()
    }
}
#endif
