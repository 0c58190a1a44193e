import Foundation
import Logging
import PostgresNIO
import TaskBroker
import TaskBrokerPostgres
import Testing

/// Every connection of a worker's pool stops answering (each server process stopped with
/// SIGSTOP), as when the network between them is cut without a word or the server's processes
/// hang. postgres-nio has no time limit of its own: the worker's next claim or read waited for
/// the operating system to give up on its connection (many minutes), and every outcome behind it.
/// Now an operation that gets no answer within `operationTimeout` closes its connection and
/// fails, and the broker tries again on a new one.
@Suite(.timeLimit(.minutes(1)))
struct PostgresSilentServerTests {
    @Test func aWorkerWhosePoolStopsAnsweringGoesOnWithNewConnections() async throws {
        let store = try TestStore(.postgres)
        let log = LogRecorder()
        var configuration = try store.postgresConfiguration()
        configuration.operationTimeout = .seconds(2)
        configuration.logger = Logger(label: "pool", factory: { _ in log })
        let worker = try await TaskDatabase.postgres(configuration: configuration)
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(
            database: worker, name: "h", handler: handler,
            configuration: .init(storageRetryBackoff: .init(initial: .milliseconds(50), maximum: .milliseconds(200)))
        )
        try await worker.save(TestAction(key: "before", queueName: "h-q"))
        #expect(await handler.handled.values(count: 1) == ["before"])

        // Another schema's database, whose connections the test does not stop, asks the server.
        let admin = try await TestStore(.postgres).open()
        let stopped = try await Self.stopEveryPoolProcess(named: "taskbroker \(store.schema)", admin)
        defer { for process in stopped { kill(process, SIGCONT) } }
        try #require(!stopped.isEmpty, "the worker's pool has connections to stop")

        // Saved by another process: the worker hears it on its change feed, which still answers.
        let other = try await store.open()
        try await other.save(TestAction(key: "after", queueName: "h-q"))
        #expect(await handler.handled.values(count: 2) == ["before", "after"])
        #expect(await log.waitForLine(containing: "did not answer within") != nil)
        await broker.shutdown()
        #expect(try await other.snapshot().isEmpty)
    }

    /// Stops (SIGSTOP) every server process of the connections named `applicationName` while it
    /// idles waiting for its client, and only then: stopped elsewhere, it may hold a lock (one a
    /// commit with a NOTIFY needs) that the test's own saves would wait for. Returns the processes.
    private static func stopEveryPoolProcess(named applicationName: String, _ admin: TaskDatabase) async throws -> [Int32] {
        let processes = try await admin.write { tx -> [Int32] in
            let rows = try await tx.query("SELECT pid FROM pg_stat_activity WHERE application_name = \(applicationName)")
            var pids: [Int32] = []
            for try await pid in rows.decode(Int32.self) { pids.append(pid) }
            return pids
        }
        var stopped: [Int32] = []
        for process in processes {
            for _ in 0..<1_000 {
                guard kill(process, SIGSTOP) == 0 else { break }
                let idle = try await admin.write { tx -> Bool in
                    let rows = try await tx.query(
                        "SELECT state = 'idle' AND wait_event = 'ClientRead' FROM pg_stat_activity WHERE pid = \(process)"
                    )
                    var idle = false
                    for try await value in rows.decode(Bool?.self) { idle = value ?? false }
                    return idle
                }
                if idle {
                    stopped.append(process)
                    break
                }
                kill(process, SIGCONT)
                await Task.yield()
            }
        }
        return stopped
    }
}
