// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
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
@Suite(.timeLimit(.minutes(3)))
struct PostgresSilentServerTests {
    @Test func aWorkerWhosePoolStopsAnsweringGoesOnWithNewConnections() async throws {
        let store = try TestStore(.postgres)
        let log = LogRecorder()
        var configuration = try store.postgresConfiguration()
        // 15 s: short for the test's time limit, and long enough for the setup's own operations
        // on a loaded machine, where recording the broker has taken over 5 s before any
        // connection was stopped.
        configuration.operationTimeout = .seconds(15)
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

    /// Stops (SIGSTOP) every server process of the connections named `applicationName`, each
    /// while it idles waiting for its client (see `ServerProcesses.stopIfWaitingForItsClient`).
    /// Returns the processes stopped.
    private static func stopEveryPoolProcess(named applicationName: String, _ admin: TaskDatabase) async throws -> [Int32] {
        var stopped: [Int32] = []
        for process in try await ServerProcesses.named(applicationName, asking: admin) {
            for _ in 0..<1_000 {
                if try await ServerProcesses.stopIfWaitingForItsClient(process, asking: admin) {
                    stopped.append(process)
                    break
                }
                await Task.yield()
            }
        }
        return stopped
    }
}
#endif
