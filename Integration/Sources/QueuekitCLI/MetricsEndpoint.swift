#if Console
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import NIOCore
import Prometheus
import TaskBroker

/// `GET /metrics` in Prometheus' text format, for `queuekit serve` and `queuekit work --metrics`:
/// the process's swift-metrics (a worker's broker counters, timers and running actions) through
/// swift-prometheus, and the database's queue gauges by name prefix (`TaskQueueGauges`), read
/// when scraped.
enum MetricsEndpoint {
    /// The process's registry: swift-metrics is bootstrapped with it once.
    static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }()

    /// Adds `GET /metrics` to `router`; with `token`, it asks for `Authorization: Bearer <token>`.
    static func addRoute(to router: Router<BasicRequestContext>, database: TaskDatabase, token: String?) {
        let registry = Self.registry
        let gauges = TaskQueueGauges(database: database)
        router.get("metrics") { request, _ -> Response in
            if let token, request.headers[.authorization] != "Bearer \(token)" {
                return Response(status: .unauthorized, headers: [.wwwAuthenticate: "Bearer"], body: .init(byteBuffer: ByteBuffer(string: "a bearer token is needed\n")))
            }
            do {
                try await gauges.update()
            } catch {
                // The brokers' own metrics are still worth a scrape; the gauges keep their last values.
                return Response(
                    status: .serviceUnavailable, headers: [.contentType: "text/plain; charset=utf-8"],
                    body: .init(byteBuffer: ByteBuffer(string: "the database did not answer: \(error)\n"))
                )
            }
            var text: [UInt8] = []
            registry.emit(into: &text)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: text))
            )
        }
    }

    /// Runs `body` (a worker) with `GET /metrics` served on `listen` beside it, when given: the
    /// server listens (and has printed where) before `body` starts, and has stopped when this
    /// returns or throws.
    static func serving<T>(listen: String?, database: TaskDatabase, _ body: () async throws -> T) async throws -> T {
        guard let listen else { return try await body() }
        let server = try await serve(listen: listen, database: database)
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        server.cancel()
        _ = await server.result
        return try result.get()
    }

    /// Serves `GET /metrics` on `listen` beside a worker, until the returned task is cancelled;
    /// returns once it listens (and has printed where).
    static func serve(listen: String, database: TaskDatabase) async throws -> Task<Void, any Error> {
        let (host, port) = try Serve.address(listen)
        _ = registry
        let router = Router()
        addRoute(to: router, database: database, token: nil)
        var logger = Logger(label: "queuekit.metrics")
        logger.logLevel = .warning
        let (listening, listens) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "queuekit"),
            onServerRunning: { channel in
                listens.yield(channel.localAddress?.port ?? port)
                listens.finish()
            },
            logger: logger
        )
        let server = Task {
            // Ends the wait below when the server stops before it listens (the port is taken).
            defer { listens.finish() }
            try await app.run()
        }
        var ports = listening.makeAsyncIterator()
        guard let bound = await ports.next() else {
            server.cancel()
            let reason = if case .failure(let error) = await server.result { "\(error)" } else { "it stopped" }
            throw QueuekitError("--metrics \(listen): could not listen there (\(reason))", exitCode: 1)
        }
        say("queuekit: metrics on http://\(host.contains(":") ? "[\(host)]" : host):\(bound)/metrics")
        return server
    }
}
#endif
