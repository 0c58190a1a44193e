// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Foundation
import TaskBroker
import TaskBrokerPostgres
import Testing

/// A worker dies without a word (power lost, network cut: no FIN, no RST) after the server ran a
/// statement of one of its transactions and before its COMMIT arrived. The worker reaches the
/// server through a forwarder that freezes every byte of every connection, both ways, right after
/// it passed a finish call; then the worker is SIGKILLed. The server keeps that transaction's
/// session, with the lease rows it locked, until it notices the peer is gone: TCP keepalive gives
/// up after over two hours by default. The backend's own sessions are ended by the server once
/// idle in a transaction for a quarter of the lease, so another worker takes the queues over
/// within the lease.
@Suite(.timeLimit(.minutes(3)))
struct PostgresSilentDeathTests {
    @Test func aWorkerCutOffInsideItsFinishLosesItsQueuesWithinTheLease() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open(leaseDuration: .seconds(2))
        let actions = (0..<160).map { CrashAction(key: "k\($0)", queueName: "crash-q\($0 % 8)", index: $0) }
        try await database.save(actions)

        var components = try #require(URLComponents(string: try PostgresTestServer.url()))
        let forwarder = try CrashHelperRun(arguments: ["forward", "\(components.port ?? 5432)", "SELECT * FROM \"\(store.schema)\".finish("])
        defer { forwarder.process.terminate() }
        let listening = await forwarder.line(after: 0)
        let port: Int? = listening.hasPrefix("listening ") ? Int(String(listening.dropFirst("listening ".count))) : nil
        let forwarderPort = try #require(port, "the forwarder said \(listening)")
        components.port = forwarderPort
        let directory = try TemporaryDirectory()
        // The crash test's worker (broker "crash", lease 2 s), through the forwarder.
        let worker = try CrashHelperRun(arguments: ["pg-worker", try #require(components.string), store.schema, directory.path("stamps")])
        let frozen = await forwarder.line(after: 1)
        let said = await worker.lines.values(count: 1)
        #expect(frozen == "frozen", "the worker said \(said)")
        await worker.kill()
        let killed = ContinuousClock.now

        let handler = RecordingHandler<CrashAction>()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "crash", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let recorder = EventRecorder(broker)
        broker.start()
        var successes = 0
        while !(try await database.snapshot().isEmpty) {
            successes += 1
            _ = await recorder.wait(for: { if case .succeeded = $0 { true } else { false } }, occurrence: successes)
            try #require(!Task.isCancelled, "the queues were not taken over in time")
        }
        print("silent death: every queue taken over and drained \(killed.duration(to: .now)) after the worker was cut off and killed (lease 2 s)")
        // The cut-off session would have been idle in its transaction since the freeze, seconds
        // ago; the live broker's own transactions are between two statements for milliseconds
        // (counting those made this check fail now and then on a loaded machine).
        #expect(try await Self.sessions(of: store.schema, inState: "idle in transaction", forAtLeast: 1, asking: database) == 0)
        await broker.shutdown()
    }

    /// How many sessions of the backend's own pools for `schema` have been in `state` for at
    /// least `seconds`.
    static func sessions(of schema: String, inState state: String, forAtLeast seconds: Double, asking database: TaskDatabase) async throws -> Int {
        try await database.write { tx in
            let rows = try await tx.query("""
                SELECT count(*)::int8 FROM pg_stat_activity
                WHERE application_name = \("taskbroker \(schema)") AND state = \(state)
                    AND state_change < now() - make_interval(secs => \(seconds))
                """)
            var count = 0
            for try await value in rows.decode(Int64.self) { count = Int(value) }
            return count
        }
    }
}
#endif
