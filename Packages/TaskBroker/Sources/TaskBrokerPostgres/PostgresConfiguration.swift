import Foundation
public import Logging
public import NIOSSL
import PostgresNIO
public import TaskBrokerCore

extension TaskDatabase {
    /// Where and how `TaskDatabase/postgres(configuration:)` connects; every field but the host
    /// and user has a default.
    ///
    /// ```swift
    /// let database = try await TaskDatabase.postgres(configuration: .init(
    ///     host: "db.internal", port: 5432, username: "app", password: secret, database: "app"))
    /// // or
    /// let database = try await TaskDatabase.postgres(configuration: .init(url: "postgres://app:secret@db.internal/app"))
    /// ```
    public struct PostgresConfiguration: Sendable {
        /// The server's host name or IP address.
        public var host: String
        /// The server's TCP port. Defaults to 5432.
        public var port: Int
        /// The user to connect as.
        public var username: String
        /// The user's password, if the server asks for one.
        public var password: String?
        /// The database; `nil` uses the server's default (the user's name).
        public var database: String?
        /// Transport security. Defaults to `TLS/disable`.
        public var tls: TLS
        /// The PostgreSQL schema that holds TaskBroker's tables (created if missing). Lowercase
        /// letters, digits and `_`, at most 40 characters. Defaults to `taskbroker`. Workers that
        /// share work use the same schema; separate schemas are separate brokers' worlds.
        public var schema: String
        /// How long a worker's claim on a queue lasts unless renewed. A worker renews the leases
        /// of its running actions every third of it; a worker that dies (or loses the database
        /// for longer) loses its queues to another worker after at most this long. Defaults to 10 s.
        public var leaseDuration: Duration
        /// The most connections a `TaskDatabase` opens for the broker's own operations: claims,
        /// finishes and reads. Lease renewals have two connections of their own,
        /// the change feed one, and your transactions (`TaskDatabase/write(_:)`) and writes a pool
        /// of `transactionPoolSize`, so that neither waits behind the other. Defaults to 8.
        public var poolSize: Int
        /// The most connections a `TaskDatabase` opens for your transactions
        /// (`TaskDatabase/write(_:)`) and your saves, deletes, restarts and purges. Defaults to 8.
        public var transactionPoolSize: Int
        /// How long one of your transactions (`TaskDatabase/write(_:)`, and your saves, deletes,
        /// restarts and purges) may sit idle between two statements before the server ends it and
        /// rolls it back (PostgreSQL's `idle_in_transaction_session_timeout`); `nil` for no limit.
        /// A transaction whose process died without a word (power, a network cut) otherwise holds
        /// its row locks, on actions it replaced or deleted and so on their queues, until TCP
        /// keepalive gives up on it. The broker's own transactions (claims, finishes, renewals)
        /// may idle half the lease (at most `operationTimeout`). Defaults to 60 s.
        public var transactionIdleTimeout: Duration?
        /// How long connecting may take before it fails. Defaults to 10 s.
        public var connectTimeout: Duration
        /// Whether every connection is read-only (PostgreSQL's `default_transaction_read_only`;
        /// `false` by default; URL parameter `readonly=true`): for tools that inspect the queues.
        /// Every write fails with the server's error and nothing is written, not even a migration:
        /// a schema an older TaskBroker wrote is `.incompatibleSchema` until a read-write open
        /// migrates it.
        public var readOnly = false
        /// How often the change feed checks that its listening connection still answers. A
        /// connection that does not answer within this time either (a peer gone without a word: a
        /// NAT or firewall that forgot the connection, a host that lost power) is closed and
        /// opened again, followed by a catch-up scan; without the check, other processes' saves
        /// would wait for the operating system to notice (many minutes). Defaults to 10 s.
        public var heartbeatInterval: Duration
        /// How long one of the backend's own operations (a claim, a finish, a lease renewal, a
        /// read, a save, a delete) may wait for the server. A connection that has not answered by
        /// then (a peer gone without a word: a network cut, a NAT that forgot the connection, a
        /// server process that hangs) is closed, and the operation fails with `storageFailed`; the
        /// broker tries again, on another connection. Without it, the operation waited for the
        /// operating system to give up on the connection (many minutes), and the broker's outcomes
        /// waited behind it. A lease renewal waits at most a third of the lease, whatever this is.
        /// Your own transactions (`TaskDatabase/write(_:)`) are not limited. Defaults to 30 s.
        public var operationTimeout: Duration
        /// Where the backend logs reconnections and lost leases; silent by default.
        public var logger: Logger

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - host: The server's host name or IP address.
        ///   - port: The server's TCP port.
        ///   - username: The user to connect as.
        ///   - password: The user's password, if any.
        ///   - database: The database, or `nil` for the server's default.
        ///   - tls: Transport security.
        ///   - schema: The schema of TaskBroker's tables.
        ///   - leaseDuration: How long a claim on a queue lasts unless renewed.
        ///   - poolSize: The most connections for the backend's own operations.
        ///   - transactionPoolSize: The most connections for your transactions.
        ///   - transactionIdleTimeout: How long your transaction may idle between statements.
        ///   - connectTimeout: How long connecting may take.
        ///   - heartbeatInterval: How often the change feed checks its connection.
        ///   - operationTimeout: How long one of the backend's own operations may wait for the server.
        ///   - logger: Where the backend logs.
        public init(
            host: String,
            port: Int = 5432,
            username: String,
            password: String? = nil,
            database: String? = nil,
            tls: TLS = .disable,
            schema: String = "taskbroker",
            leaseDuration: Duration = .seconds(10),
            poolSize: Int = 8,
            transactionPoolSize: Int = 8,
            transactionIdleTimeout: Duration? = .seconds(60),
            connectTimeout: Duration = .seconds(10),
            heartbeatInterval: Duration = .seconds(10),
            operationTimeout: Duration = .seconds(30),
            logger: Logger = Logger(label: "TaskBrokerPostgres", factory: { _ in SwiftLogNoOpLogHandler() })
        ) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
            self.database = database
            self.tls = tls
            self.schema = schema
            self.leaseDuration = leaseDuration
            self.poolSize = poolSize
            self.transactionPoolSize = transactionPoolSize
            self.transactionIdleTimeout = transactionIdleTimeout
            self.connectTimeout = connectTimeout
            self.heartbeatInterval = heartbeatInterval
            self.operationTimeout = operationTimeout
            self.logger = logger
        }

        /// Creates a configuration from a URL:
        /// `postgres://user:password@host:port/database?schema=taskbroker&lease=10`.
        ///
        /// `postgresql://` works too; user, password and database may be percent-encoded. The query
        /// may set `schema` and `lease` (seconds); `sslmode=disable` is accepted, and for TLS set
        /// `tls` in code.
        ///
        /// - Parameter url: The URL.
        /// - Throws: `TaskBrokerError` with code `.invalidConfiguration` naming what is wrong.
        public init(url: String) throws {
            func invalid(_ why: String) -> TaskBrokerError {
                TaskBrokerError(code: .invalidConfiguration, message: "Not a usable PostgreSQL URL (\(why)): expected postgres://user:password@host:port/database")
            }
            guard let components = URLComponents(string: url) else { throw invalid("it does not parse") }
            guard let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
                throw invalid("the scheme must be postgres:// or postgresql://")
            }
            guard let host = components.host, !host.isEmpty else { throw invalid("it names no host") }
            guard let username = components.user, !username.isEmpty else { throw invalid("it names no user") }
            let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
            self.init(
                host: host, port: components.port ?? 5432, username: username, password: components.password,
                database: path.isEmpty ? nil : path.removingPercentEncoding ?? path
            )
            for item in components.queryItems ?? [] {
                switch item.name {
                case "schema":
                    guard let value = item.value, !value.isEmpty else { throw invalid("schema is empty") }
                    schema = value
                case "lease":
                    // Checked before the conversion: a value past Int64's milliseconds trapped.
                    guard let value = item.value.flatMap(Double.init), value.isFinite, value > 0,
                          value <= Double(Self.longestLease.components.seconds)
                    else {
                        throw invalid("lease must be a positive number of seconds, at most 86400 (a day)")
                    }
                    leaseDuration = .milliseconds(Int64((value * 1000).rounded()))
                case "readonly":
                    guard let value = item.value, ["true", "false"].contains(value) else {
                        throw invalid("readonly must be true or false")
                    }
                    readOnly = value == "true"
                case "sslmode":
                    guard item.value == "disable" else {
                        throw invalid("sslmode=\(item.value ?? "") is not taken from a URL; set `tls` in code")
                    }
                default:
                    throw invalid("unknown parameter \(item.name)")
                }
            }
        }

        /// Whether and how the connections use TLS.
        public enum TLS: Sendable {
            /// Plain TCP (the default; for loopback and private networks).
            case disable
            /// TLS if the server offers it, plain TCP if not.
            case prefer(TLSConfiguration)
            /// TLS, or no connection.
            case require(TLSConfiguration)

            var client: PostgresClient.Configuration.TLS {
                switch self {
                case .disable: .disable
                case .prefer(let configuration): .prefer(configuration)
                case .require(let configuration): .require(configuration)
                }
            }

            func connection() throws -> PostgresConnection.Configuration.TLS {
                switch self {
                case .disable: .disable
                case .prefer(let configuration): .prefer(try NIOSSLContext(configuration: configuration))
                case .require(let configuration): .require(try NIOSSLContext(configuration: configuration))
                }
            }
        }

        /// `host:port/database`, for messages (never the password).
        var endpoint: String {
            "\(host):\(port)/\(database ?? username)"
        }

        /// The longest lease: a day. A dead worker's queues wait that long for another worker;
        /// far longer, the server's timestamps overflow and every claim fails.
        static let longestLease: Duration = .seconds(86_400)

        /// Checks what the server cannot check for us.
        func validated() throws -> Self {
            let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789_")
            guard !schema.isEmpty, schema.count <= 40, schema.allSatisfy(allowed.contains), !(schema.first?.isNumber ?? true) else {
                throw TaskBrokerError(
                    code: .invalidConfiguration,
                    message: "The schema name \"\(schema)\" is not usable: use lowercase letters, digits and _ (at most 40 characters, not starting with a digit)."
                )
            }
            guard leaseDuration > .milliseconds(100), leaseDuration <= Self.longestLease else {
                throw TaskBrokerError(
                    code: .invalidConfiguration,
                    message: "The lease duration must be longer than 100 ms and at most a day (86,400 s); got \(leaseDuration)."
                )
            }
            // PostgreSQL reserves these: CREATE SCHEMA refuses them, which read as a permission problem.
            guard !schema.hasPrefix("pg_") else {
                throw TaskBrokerError(
                    code: .invalidConfiguration,
                    message: "The schema name \"\(schema)\" is reserved by PostgreSQL (names starting with pg_); choose another."
                )
            }
            // Both are counted in milliseconds (Int64) on their way to postgres-nio and SQL: far
            // larger values would trap there.
            guard connectTimeout > .zero, connectTimeout <= .seconds(3_600) else {
                throw TaskBrokerError(code: .invalidConfiguration, message: "The connect timeout must be more than 0 and at most an hour; got \(connectTimeout).")
            }
            guard operationTimeout >= .milliseconds(10), operationTimeout <= .seconds(3_600) else {
                throw TaskBrokerError(code: .invalidConfiguration, message: "The operation timeout must be at least 10 ms and at most an hour; got \(operationTimeout).")
            }
            guard heartbeatInterval >= .milliseconds(10) else {
                throw TaskBrokerError(code: .invalidConfiguration, message: "The heartbeat interval must be at least 10 ms; got \(heartbeatInterval).")
            }
            guard (1...1000).contains(poolSize), (1...1000).contains(transactionPoolSize), (1...65535).contains(port) else {
                throw TaskBrokerError(
                    code: .invalidConfiguration,
                    message: "The pool sizes must be 1...1000 and the port 1...65535; got \(poolSize), \(transactionPoolSize) and \(port)."
                )
            }
            if let transactionIdleTimeout {
                guard transactionIdleTimeout >= .milliseconds(1), transactionIdleTimeout <= .seconds(86_400) else {
                    throw TaskBrokerError(
                        code: .invalidConfiguration,
                        message: "The transaction idle timeout must be at least 1 ms and at most a day, or nil for none; got \(transactionIdleTimeout)."
                    )
                }
            }
            return self
        }
    }
}
