#if Console
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TaskBroker
#if Postgres
import TaskBrokerPostgres
#endif
import Testing

/// `queuekit serve`: the web console as an operator starts it, over another application's
/// database, reached over real HTTP.
@Suite(.timeLimit(.minutes(1)))
struct QueuekitServeTests {
    struct Mail: TaskQueueAction {
        var key: String
        var collection = "mail"
        var queueName: String
        var body: String
    }

    @Test func theConsoleShowsAnApplicationsQueuesAndPausesOne() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("app.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        try await database.save([Mail(key: "m1", queueName: "mail-42", body: "hello"), Mail(key: "m2", queueName: "mail-42", body: "again")])
        let server = try RunningTool(["serve", "--database", "sqlite:\(path)", "--listen", "127.0.0.1:0"], in: folder.url)
        let base = try await Self.address(of: server)

        let (metrics, metricsStatus) = try await Self.fetch(base + "/metrics")
        #expect(metricsStatus == 200)
        #expect(metrics.contains("taskbroker_queue_depth{prefix=\"mail\"} 2.0"), "\(metrics)")
        #expect(metrics.contains("taskbroker_queues{prefix=\"mail\"} 1.0"), "\(metrics)")
        let (queues, queuesStatus) = try await Self.fetch(base + "/")
        #expect(queuesStatus == 200)
        #expect(queues.contains("<code>mail-42</code>"))
        let (queue, _) = try await Self.fetch(base + "/queue?name=mail-42")
        #expect(queue.contains("m1") && queue.contains("m2"))
        let token = try #require(Self.csrfToken(in: queue))
        // The browser follows the 303 back to the queue's page.
        let (after, status) = try await Self.fetch(base + "/pause", form: "csrf=\(token)&queue=mail-42")
        #expect(status == 200)
        #expect(after.contains("paused by an operator"))
        #expect(try await database.snapshot().first?.pausedByOperator == true)

        server.interrupt()
        let run = await server.finish()
        #expect(run.status == 0, "SIGINT stops the console cleanly")
        #expect(run.stderr.isEmpty, "\(run.stderr)")
    }

    /// The live counts follow another process's saves through the database's change
    /// notifications: with a heartbeat of ten minutes, only a notification can bring the update
    /// within the suite's time limit. SIGINT then ends the stream and the server with status 0.
    @Test func liveCountsFollowAnotherProcesssSavesAndEndCleanlyOnSIGINT() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("app.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        try await database.save(Mail(key: "m0", queueName: "mail-1", body: "first"))
        let server = try RunningTool(
            ["serve", "--database", "sqlite:\(path)", "--listen", "127.0.0.1:0", "--heartbeat", "600"], in: folder.url
        )
        let base = try await Self.address(of: server)
        let curl = try RunningTool(executable: URL(fileURLWithPath: "/usr/bin/curl"), ["-sN", base + "/events"], in: folder.url)
        await curl.output(containing: "\"pending\":1,")
        try await database.save([Mail(key: "m1", queueName: "mail-1", body: "a"), Mail(key: "m2", queueName: "mail-2", body: "b")])
        await curl.output(containing: "\"pending\":3,")
        try await database.pauseQueues(["mail-2"])
        await curl.output(containing: "\"paused\":1,")
        let events = curl.outputSoFar.components(separatedBy: "event: counts\n").dropFirst()
        #expect(events.count >= 3)
        #expect(events.last?.contains("\"mail-2\":{\"deadLetters\":0,\"failures\":0,\"parallel\":0,\"pending\":1,\"state\":\"paused by an operator\",\"stateKind\":\"operator\"}") == true, "\(curl.outputSoFar)")

        server.interrupt()
        let run = await server.finish()
        #expect(run.status == 0, "SIGINT with a live stream open stops the console cleanly: \(run.stderr)")
        let client = await curl.finish()
        #expect(client.status == 0, "the stream ended, and curl with it")
    }

    @Test func anAddressOffLoopbackNeedsATokenFileAndThenEveryPageAsksForIt() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("app.sqlite")
        _ = try await TaskDatabase.sqlite(path: path)
        let refused = try await QueuekitBinary.run(["serve", "--database", "sqlite:\(path)", "--listen", "0.0.0.0:0"], in: folder.url)
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("--token-file"), "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1, "one line: \(refused.stderr)")

        let token = "a-token-of-twenty-four!!"
        try (token + "\n").write(toFile: folder.path("token"), atomically: true, encoding: .utf8)
        let server = try RunningTool(
            ["serve", "--database", "sqlite:\(path)", "--listen", "0.0.0.0:0", "--token-file", folder.path("token")], in: folder.url
        )
        let base = try await Self.address(of: server).replacingOccurrences(of: "0.0.0.0", with: "127.0.0.1")
        #expect(try await Self.fetch(base + "/").status == 401)
        #expect(try await Self.fetch(base + "/", bearer: "wrong").status == 401)
        #expect(try await Self.fetch(base + "/", bearer: token).status == 200)
        #expect(try await Self.fetch(base + "/metrics").status == 401, "the scrape asks for the token too")
        #expect(try await Self.fetch(base + "/metrics", bearer: token).status == 200)
        server.interrupt()
        _ = await server.finish()
    }

    #if Postgres
    /// The workers page over PostgreSQL: which broker of which process holds which queue, under
    /// which epoch, until when; and the rate limits page: the starts its limit counts.
    @Test func theWorkersPageShowsWhichBrokerHoldsWhichQueueOnPostgres() async throws {
        let folder = try TemporaryDirectory()
        let schema = "qk_" + UUID().uuidString.prefix(8).lowercased()
        var configuration = try TaskDatabase.PostgresConfiguration(url: try ToolBackend.serverURL())
        configuration.schema = schema
        let database = try await TaskDatabase.postgres(configuration: configuration)
        try await database.save([Mail(key: "m1", queueName: "mail-7", body: "held"), Mail(key: "m2", queueName: "mail-7", body: "next")])
        let handler = HoldingHandler()
        var brokerConfiguration = TaskQueueBroker.Configuration()
        brokerConfiguration.rateLimits = [try TaskRateLimit(prefix: "mail-", starts: 100, per: .seconds(3_600))]
        let broker = try await TaskQueueBroker.setup(database: database, name: "mail-", handler: handler, configuration: brokerConfiguration)
        // The handler runs m1 and holds it: the broker holds mail-7's lease until it is let go.
        _ = await handler.started.first { _ in true }

        let server = try RunningTool(
            ["serve", "--database", "\(try ToolBackend.serverURL())?schema=\(schema)", "--listen", "127.0.0.1:0"], in: folder.url
        )
        let base = try await Self.address(of: server)
        let (workers, status) = try await Self.fetch(base + "/workers")
        #expect(status == 200)
        #expect(workers.contains("1 broker(s) in 1 process(es) hold leases: 1 queue(s)"), "\(workers)")
        #expect(workers.contains("<code>mail-</code>") && workers.contains("<code>mail-7</code>"), "the broker and its queue: \(workers)")
        #expect(workers.contains("epoch 1, ends in"), "the lease's epoch and end: \(workers)")
        let (limits, _) = try await Self.fetch(base + "/rate-limits")
        #expect(limits.contains("<td>queues of prefix</td><td><code>mail-</code></td><td>1</td>"), "one start counted: \(limits)")

        handler.release()
        await broker.shutdown()
        server.interrupt()
        let run = await server.finish()
        #expect(run.status == 0, "\(run.stderr)")
    }

    /// Holds each action it runs until ``release()``.
    final class HoldingHandler: AsyncTaskQueueHandler {
        let started: AsyncStream<String>
        private let startedContinuation: AsyncStream<String>.Continuation
        private let gate = AsyncStream<Void>.makeStream()

        init() {
            (started, startedContinuation) = AsyncStream.makeStream()
        }

        func handle(_ action: Mail, context: TaskContext) async -> TaskResult {
            startedContinuation.yield(action.key)
            for await _ in gate.stream { break }
            return .success
        }

        func release() {
            gate.continuation.finish()
        }
    }
    #endif

    /// `queuekit work --metrics`: Prometheus scrapes the broker's own counters and running
    /// actions while it works.
    @Test func aWorkerServesItsMetricsWhileItWorks() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("q.sqlite")
        let db = ["--database", "sqlite:\(path)"]
        let enqueued = try await QueuekitBinary.run(["enqueue", "--queue", "alice", "--count", "5"] + db, in: folder.url)
        #expect(enqueued.status == 0, "\(enqueued.stderr)")
        let database = try await TaskDatabase.sqlite(path: path)
        var changes = try await database.queueChanges().makeAsyncIterator()
        let worker = try RunningTool(["work", "--watch", "--work-ms", "0", "--metrics", "127.0.0.1:0"] + db, in: folder.url)
        await worker.output(containing: "/metrics\n")
        let line = try #require(worker.outputSoFar.split(separator: "\n").first { $0.contains("metrics on http://") })
        let url = try #require(line.split(separator: " ").last.map(String.init))
        // Every upload done: the database says so through its change notifications.
        while try await !database.snapshot().isEmpty {
            guard await changes.next() != nil else { break }
        }
        let (metrics, status) = try await Self.fetch(url)
        #expect(status == 200)
        #expect(metrics.contains("taskbroker_actions_handled{broker=\"uploads\"} 5"), "\(metrics)")
        #expect(metrics.contains("taskbroker_actions_running{broker=\"uploads\"} 0"), "\(metrics)")
        #expect(metrics.contains("taskbroker_handle_duration"), "\(metrics)")
        worker.interrupt()
        let run = await worker.finish()
        #expect(run.status == 0, "\(run.stderr)")
    }

    /// The console's address, from the line `serve` prints once it listens.
    private static func address(of server: RunningTool) async throws -> String {
        await server.output(containing: "/\n")
        let run = server.outputSoFar
        guard let range = run.range(of: "http://") else { throw NotListening(output: run) }
        return String(run[range.lowerBound...].prefix { !$0.isWhitespace }.dropLast())
    }

    private struct NotListening: Error, CustomStringConvertible {
        var output: String
        var description: String { "queuekit serve printed no address: \(output)" }
    }

    /// A page's body and status, over HTTP (a form post when `form` is given).
    private static func fetch(_ url: String, form: String? = nil, bearer: String? = nil) async throws -> (body: String, status: Int) {
        var request = URLRequest(url: try #require(URL(string: url)))
        if let form {
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(form.utf8)
        }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return (String(decoding: data, as: UTF8.self), (response as? HTTPURLResponse)?.statusCode ?? 0)
    }

    private static func csrfToken(in page: String) -> String? {
        guard let range = page.range(of: "name=\"csrf\" value=\"") else { return nil }
        return String(page[range.upperBound...].prefix { $0 != "\"" })
    }
}
#endif
