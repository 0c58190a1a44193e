import PostgresNIO
import TaskBrokerCore

/// Typed errors with messages that say what to check.
enum PostgresErrors {
    /// Connecting failed: a wrong password, an unreachable host, a missing database.
    static func connectionFailed(_ error: any Error, _ configuration: TaskDatabase.PostgresConfiguration) -> TaskBrokerError {
        let endpoint = "\(configuration.host):\(configuration.port)"
        let database = configuration.database ?? configuration.username
        let hint: String
        if let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] {
            let message = error.serverInfo?[.message] ?? ""
            switch state {
            case "28P01", "28000":
                hint = "the server refused user \"\(configuration.username)\" (\(message)); check the user name and password"
            case "3D000":
                hint = "database \"\(database)\" does not exist on the server; create it or check the database name"
            case "53300":
                hint = "the server has no free connection slots (\(message)); raise max_connections or lower poolSize"
            default:
                hint = "the server answered \(state): \(message)"
            }
        } else {
            hint = "no PostgreSQL server answered there (\(reason(error))); check the host, the port, that the server runs and accepts "
                + "TCP connections, and the firewall"
        }
        return TaskBrokerError(
            code: .connectionFailed,
            message: "Could not connect to PostgreSQL at \(endpoint) (database \"\(database)\"): \(hint).",
            underlying: error
        )
    }

    /// A storage operation failed once connected.
    static func storageFailed(_ what: String, _ error: any Error, _ configuration: TaskDatabase.PostgresConfiguration) -> TaskBrokerError {
        let detail = error is PSQLError || error is ConnectionClosed ? ": \(reason(error))" : ""
        return TaskBrokerError(
            code: .storageFailed,
            message: "Could not \(what) in PostgreSQL at \(configuration.endpoint)\(detail); the operation was not applied.",
            underlying: error
        )
    }

    /// The server did not answer an operation within `timeout`, and its connection was closed.
    static func noAnswer(_ what: String, within timeout: Duration, _ configuration: TaskDatabase.PostgresConfiguration) -> TaskBrokerError {
        TaskBrokerError(
            code: .storageFailed,
            message: "Could not \(what) in PostgreSQL at \(configuration.endpoint): the server did not answer within \(timeout), "
                + "so the connection was closed (check the network and the server; operationTimeout sets the limit). If the "
                + "operation was committing, it may have been applied: the broker's own retries are safe either way."
        )
    }

    /// What went wrong, for a log line: the server's message (`terminating connection due to
    /// administrator command`) or postgres-nio's error code (`serverClosedConnection`), since a
    /// `PSQLError`'s own description is a generic sentence that names neither.
    static func reason(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] { return message }
        // A connection that failed below PostgreSQL: the socket's own error says why.
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }
}
