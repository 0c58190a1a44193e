#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import TaskBroker
#if canImport(TaskBrokerPostgres)
import TaskBrokerPostgres
#endif
import Testing

/// The backends the broker's behaviour tests run against, each test once per backend.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case postgres

    /// The backends of this build: SQLite alone where TaskBrokerPostgres is not built (the
    /// AddressSanitizer run builds without SwiftNIO).
    static var allCases: [Backend] {
        #if canImport(TaskBrokerPostgres)
        [.sqlite, .postgres]
        #else
        [.sqlite]
        #endif
    }

    var testDescription: String { rawValue }
}

/// A fresh, empty store of one backend that can be opened more than once (a restart): a new
/// SQLite file, or a new schema on the PostgreSQL server that `make test-all` started.
final class TestStore: Sendable {
    let backend: Backend
    private let directory: TemporaryDirectory
    /// The PostgreSQL schema of this store.
    let schema: String

    init(_ backend: Backend) throws {
        self.backend = backend
        directory = try TemporaryDirectory()
        schema = "t" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
    }

    /// A logger to standard error when QUEUEKIT_TEST_LOG is set (for debugging a test).
    var logger: Logger? {
        guard ProcessInfo.processInfo.environment["QUEUEKIT_TEST_LOG"] != nil else { return nil }
        var logger = Logger(label: "pg-\(schema)", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = .debug
        return logger
    }

    /// The SQLite file (for SQLite stores).
    var path: String { directory.path("tasks.sqlite") }

    /// Opens the store: a new `TaskDatabase` on the same file or schema each time.
    func open(leaseDuration: Duration = .seconds(10), readOnly: Bool = false) async throws -> TaskDatabase {
        switch backend {
        case .sqlite:
            return try await TaskDatabase.sqlite(path: path, configuration: .init(readOnly: readOnly))
        case .postgres:
            #if canImport(TaskBrokerPostgres)
            var configuration = try postgresConfiguration(leaseDuration: leaseDuration)
            configuration.readOnly = readOnly
            return try await TaskDatabase.postgres(configuration: configuration)
            #else
            throw PostgresTestServer.NotBuilt()
            #endif
        }
    }

    #if canImport(TaskBrokerPostgres)
    func postgresConfiguration(leaseDuration: Duration = .seconds(10)) throws -> TaskDatabase.PostgresConfiguration {
        var configuration = try TaskDatabase.PostgresConfiguration(url: try PostgresTestServer.url())
        configuration.schema = schema
        configuration.leaseDuration = leaseDuration
        configuration.poolSize = 4
        configuration.transactionPoolSize = 2
        if let logger { configuration.logger = logger }
        return configuration
    }
    #endif
}

/// The throwaway PostgreSQL server of this test run. Tests never touch a server they did not start.
enum PostgresTestServer {
    struct NotBuilt: Error, CustomStringConvertible {
        var description: String { "this build of the tests has no TaskBrokerPostgres: it runs the SQLite backend alone" }
    }

    struct NotStarted: Error, CustomStringConvertible {
        var description: String {
            "QUEUEKIT_PG_URL is not set: the PostgreSQL tests need the throwaway server that `make test-all` starts. Run `make test-all` (or `make test PACKAGE=TaskBroker`), or export QUEUEKIT_PG_URL=$(Scripts/postgres.sh up)."
        }
    }

    struct NoRestartCommand: Error, CustomStringConvertible {
        var description: String {
            "QUEUEKIT_PG_RESTART is not set: the restart tests need the command that restarts the throwaway server. Run them through `make test-all` (or `make test PACKAGE=TaskBroker`), or export QUEUEKIT_PG_RESTART=\"$PWD/Scripts/postgres.sh restart\" beside QUEUEKIT_PG_URL."
        }
    }

    /// The command that restarts the server (`Scripts/postgres.sh restart`), from `make test-all`.
    static func restartCommand() throws -> String {
        guard let command = ProcessInfo.processInfo.environment["QUEUEKIT_PG_RESTART"], !command.isEmpty else { throw NoRestartCommand() }
        return command
    }

    /// Runs a shell command on a thread of its own and fails unless it succeeds.
    static func run(_ command: String) async throws {
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread.detachNewThread {
                continuation.resume(returning: system(command))
            }
        }
        guard status == 0 else {
            throw CommandFailed(command: command, status: status)
        }
    }

    struct CommandFailed: Error {
        var command: String
        var status: Int32
    }

    static func url() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["QUEUEKIT_PG_URL"], !url.isEmpty else { throw NotStarted() }
        return url
    }
}
