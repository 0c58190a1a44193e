import ArgumentParser
import Foundation
import GRDB
import TaskBroker
#if Postgres
import TaskBrokerPostgres
#endif

/// Where `--database` says the queues live.
enum DatabaseLocation: Sendable {
    /// An embedded SQLite file: one process at a time works on it.
    case sqlite(path: String)
    #if Postgres
    /// A PostgreSQL server: any number of worker processes share its queues.
    case postgres(TaskDatabase.PostgresConfiguration, url: String)
    #endif

    /// Reads `sqlite:PATH` or `postgres://user:password@host:port/database?schema=…&lease=…`.
    init(parsing text: String) throws(QueuekitError) {
        if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst("sqlite:".count))
            guard !path.isEmpty else {
                throw QueuekitError("--database sqlite: needs a file path, e.g. sqlite:./queuekit-demo.sqlite", exitCode: 64)
            }
            self = .sqlite(path: path)
        } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            #if Postgres
            do {
                self = .postgres(try TaskDatabase.PostgresConfiguration(url: text), url: text)
            } catch {
                let reason = (error as? TaskBrokerError)?.message ?? "\(error)"
                throw QueuekitError("--database \(Self.redacted(text)): \(reason)", exitCode: 64)
            }
            #else
            throw QueuekitError(
                "--database \(Self.redacted(text)): this queuekit was built for SQLite only (as `make demo` builds it); "
                    + "build it with PostgreSQL: swift build -c release --package-path Integration --product queuekit",
                exitCode: 64
            )
            #endif
        } else {
            throw QueuekitError(
                "--database expects sqlite:PATH or postgres://USER@HOST/DATABASE (got '\(Self.redacted(text))').",
                exitCode: 64
            )
        }
    }

    /// The location for messages: the path, or the URL without its password.
    var description: String {
        switch self {
        case .sqlite(let path): path
        #if Postgres
        case .postgres(_, let url): Self.redacted(url)
        #endif
        }
    }

    /// Whether several worker processes may share the queues.
    var isShared: Bool {
        #if Postgres
        if case .postgres = self { return true }
        #endif
        return false
    }

    /// `text` with the password of a URL replaced by `***`.
    ///
    /// Found in the text, not through `URLComponents`: a URL that does not parse (a password with
    /// an unencoded `#`, `/`, `?`, `%` or space) is exactly the one an error message quotes. The
    /// user information ends at the last `@` of what follows `://`, and the password is what
    /// follows its first `:` (an `@` later in the URL hides more, never less).
    static func redacted(_ text: String) -> String {
        guard let scheme = text.range(of: "://"),
              let at = text[scheme.upperBound...].lastIndex(of: "@"),
              let colon = text[scheme.upperBound..<at].firstIndex(of: ":")
        else { return text }
        return text[..<text.index(after: colon)] + "***" + text[at...]
    }
}

/// The `--database` option every command takes.
struct DatabaseOptions: ParsableArguments {
    static let defaultLocation = "sqlite:./queuekit-demo.sqlite"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where the queues live: sqlite:PATH, or postgres://USER:PASSWORD@HOST:PORT/DATABASE (worker processes on any machine share it).",
            valueName: "sqlite:PATH|postgres://…"
        )
    )
    var database: String = DatabaseOptions.defaultLocation

    /// What `--database` names.
    func location() throws(QueuekitError) -> DatabaseLocation {
        try DatabaseLocation(parsing: database)
    }

    /// Opens the database; with `create: false` a missing SQLite file is an error instead of a new
    /// file (a PostgreSQL database gets TaskBroker's tables when they are missing). `readOnly`
    /// (the commands that only look) writes nothing, not even a migration.
    func open(create: Bool, readOnly: Bool = false) async throws -> Store {
        switch try location() {
        case .sqlite(let path):
            return try await Self.openSQLite(path: path, create: create && !readOnly, readOnly: readOnly)
        #if Postgres
        case .postgres(var configuration, let url):
            configuration.readOnly = readOnly
            return try await Self.openPostgres(configuration, url: url)
        #endif
        }
    }

    private static func openSQLite(path: String, create: Bool, readOnly: Bool) async throws -> Store {
        do {
            // Every commit survives a crash of the process; a power loss may cost the last few
            // (the demo's choice; the library's default is FULL).
            let database = try await TaskDatabase.sqlite(
                path: path, configuration: .init(synchronous: .normal, createsMissingFile: create, readOnly: readOnly)
            )
            return Store(location: .sqlite(path: path), database: database, backend: SQLiteBackend(database: database))
        } catch let error as TaskBrokerError where error.code == .databaseNotFound {
            throw QueuekitError(
                "no database at \(path); run `queuekit demo` or `queuekit enqueue` first, or pass --database sqlite:PATH."
            )
        } catch let error as TaskBrokerError where error.code == .corruptDatabase {
            let cause = (error.underlying as? DatabaseError).flatMap(\.message) ?? error.message
            throw QueuekitError("\(path) is not a QueueKit database or is corrupt (\(cause)); move it aside or pass another --database.")
        } catch let error as TaskBrokerError {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                throw QueuekitError("\(path) is a directory, not a database file; pass --database sqlite:FILE.")
            }
            throw QueuekitError("cannot open \(path): \(Store.describe(error))")
        }
    }

    #if Postgres
    private static func openPostgres(_ configuration: TaskDatabase.PostgresConfiguration, url: String) async throws -> Store {
        let location = DatabaseLocation.postgres(configuration, url: url)
        do {
            let database = try await TaskDatabase.postgres(configuration: configuration)
            return Store(location: location, database: database, backend: PostgresBackend(database: database, schema: configuration.schema))
        } catch let error as TaskBrokerError {
            throw QueuekitError("cannot open \(location.description): \(Store.describe(error))")
        }
    }
    #endif
}
