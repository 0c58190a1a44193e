#if Console
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
import TaskBroker
import TaskBrokerConsole

/// `queuekit serve`: TaskBroker's web console over any TaskBroker database.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve TaskBroker's web console (queues, actions, dead letters and schedules, with pause, resume, replay, discard, delete and purge) and GET /metrics for Prometheus.",
        discussion: """
            Listens on loopback (127.0.0.1:8080) by default. Any other address needs --token-file: \
            every page then asks for that token (a bearer token, or the console's login form). \
            Stops on SIGINT or SIGTERM.
            """
    )

    @OptionGroup var options: DatabaseOptions

    @Option(help: "HOST:PORT to listen on (port 0: any free port, printed at start).")
    var listen = "127.0.0.1:8080"

    @Option(help: "A file whose first line is the access token every page asks for (needed off loopback).")
    var tokenFile: String?

    @Option(help: "Seconds between two updates of the live counts when nothing changes (changes are sent at once).")
    var heartbeat = 15.0

    func run() async throws {
        let (host, port) = try Self.address(listen)
        let token = try tokenFile.map(Self.token(in:))
        guard token != nil || Self.isLoopback(host) else {
            throw QueuekitError(
                "--listen \(listen) is reachable from other machines: give the console an access token with --token-file FILE "
                    + "(or listen on 127.0.0.1)",
                exitCode: 64
            )
        }
        let store = try await options.open(create: false)
        let name = try options.location().description
        guard heartbeat >= 1, heartbeat <= 86_400 else {
            throw QueuekitError("--heartbeat must be between 1 and 86400 seconds (got \(heartbeat))", exitCode: 64)
        }
        let console = TaskBrokerConsole(
            database: store.database, configuration: .init(accessToken: token, liveHeartbeat: .milliseconds(Int64(heartbeat * 1_000)))
        )
        let router = Router()
        // Prometheus' scrape of the queue gauges (its bearer token too, off loopback); the
        // console's routes take the rest.
        MetricsEndpoint.addRoute(to: router, database: store.database, token: token)
        console.addRoutes(to: router)
        // Hummingbird's own lines (started, stopped) repeat ours: only its warnings and errors.
        var logger = Logger(label: "queuekit.serve")
        logger.logLevel = .warning
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "queuekit"),
            // The console samples the counts for its charts while it runs, page open or not.
            services: [console],
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                say("queuekit: the console of \(name) is on http://\(host.contains(":") ? "[\(host)]" : host):\(bound)/")
            },
            logger: logger
        )
        try await app.runService()
    }

    /// `HOST:PORT` (`[::1]:8080` for an IPv6 address) as its host and port.
    static func address(_ text: String) throws(QueuekitError) -> (String, Int) {
        let invalid = QueuekitError("--listen expects HOST:PORT, e.g. 127.0.0.1:8080 (got '\(text)')", exitCode: 64)
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65_535).contains(port) else {
            throw invalid
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw invalid }
        return (host, port)
    }

    /// Whether only this machine reaches `host`.
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// The first line of the token file, without surrounding spaces; never empty.
    static func token(in path: String) throws(QueuekitError) -> String {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw QueuekitError("--token-file \(path): cannot be read (\(error.localizedDescription))", exitCode: 66)
        }
        let token = text.split(separator: "\n", omittingEmptySubsequences: false).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard token.count >= 16 else {
            throw QueuekitError("--token-file \(path): its first line must be a token of at least 16 characters", exitCode: 64)
        }
        return token
    }
}
#else
import ArgumentParser

/// `queuekit serve` in a build without the trait `Console` (as `make demo` builds the tool): one
/// line that says how to build the tool with it.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve TaskBroker's web console (not in this build).", shouldDisplay: false)

    @Argument(parsing: .allUnrecognized) var arguments: [String] = []

    func run() async throws {
        throw QueuekitError(
            "serve: this queuekit was built without the web console (as `make demo` builds it); "
                + "build it with the console: swift build -c release --package-path Integration --product queuekit",
            exitCode: 64
        )
    }
}
#endif
