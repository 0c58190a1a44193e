import Foundation
import Testing

/// Where a `queuekit` test keeps its queues: an SQLite file in the test's folder, or a schema of
/// its own on the throwaway PostgreSQL server that `make test-all` starts (`QUEUEKIT_PG_URL`).
enum ToolBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// `--database …` for a new database of this backend. The tests never touch a server they did
    /// not start: without `QUEUEKIT_PG_URL` a PostgreSQL test fails, it is not skipped.
    /// - Parameter lease: The PostgreSQL lease in seconds (short leases make takeovers quick).
    func databaseArguments(in folder: TemporaryDirectory, lease: Double = 10) throws -> [String] {
        switch self {
        case .sqlite:
            return ["--database", "sqlite:\(folder.path("q.sqlite"))"]
        case .postgres:
            return ["--database", "\(try Self.serverURL())?schema=qk_\(UUID().uuidString.prefix(8).lowercased())&lease=\(lease)"]
        }
    }

    /// The throwaway server's URL.
    static func serverURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["QUEUEKIT_PG_URL"], !url.isEmpty else {
            throw NotStarted()
        }
        return url
    }

    struct NotStarted: Error, CustomStringConvertible {
        var description: String {
            "QUEUEKIT_PG_URL is not set: the PostgreSQL tests need the throwaway server that `make test-all` starts. Run `make test-all` (or `make test PACKAGE=Integration`), or export QUEUEKIT_PG_URL=$(Scripts/postgres.sh up)."
        }
    }
}
