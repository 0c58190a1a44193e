import PostgresNIO
import TaskBrokerCore

extension PostgresTaskStorage {
    /// The three connection pools of a storage.
    struct Pools {
        let operations: PostgresClient
        let leases: PostgresClient
        let transactions: PostgresClient
        /// The pool of held claims of plain parallel actions (``PostgresTaskStorage/claimParallelHeld(_:limit:owner:leaseDuration:now:)``):
        /// each holds its connection, in a transaction, until its batch is settled.
        let held: PostgresClient

        /// How many connections the lease pool opens: renewals wait for nothing else, and a
        /// release beside a renewal does not hold it up.
        static let leaseConnections = 2

        /// How many batches of plain parallel actions a storage holds at once (one connection
        /// each); a claim beyond them writes its leases (`claimParallel`).
        static let heldConnections = 4

        init(_ configuration: TaskDatabase.PostgresConfiguration) {
            // The broker's own transactions (claims, finishes, renewals, releases: BEGIN, one
            // statement, COMMIT) wait for their client between statements only while it builds a
            // statement or reads a result: one still open half a lease later belongs to a worker
            // that died without a word (power, a network cut) after the server ran its statement.
            // Its row locks would keep every other worker from the queues it claimed until TCP
            // keepalive gives up on it (over two hours by default); the server ends it instead,
            // before the lease it holds would expire.
            let own = Self.sessionSettings(idleInTransaction: min(configuration.operationTimeout, configuration.leaseDuration / 2))
            operations = Self.pool(configuration, size: configuration.poolSize, name: "taskbroker \(configuration.schema)", settings: own)
            leases = Self.pool(configuration, size: Self.leaseConnections, name: "taskbroker \(configuration.schema)", settings: own)
            // A held batch waits for its worker's handlers between its claim and its settlement; one
            // still open half a lease later belongs to a worker that stopped answering.
            held = Self.pool(
                configuration, size: Self.heldConnections, name: "taskbroker held \(configuration.schema)",
                settings: Self.sessionSettings(idleInTransaction: configuration.leaseDuration / 2)
            )
            transactions = Self.pool(
                configuration, size: configuration.transactionPoolSize, name: "taskbroker tx \(configuration.schema)",
                settings: Self.sessionSettings(idleInTransaction: configuration.transactionIdleTimeout)
            )
        }

        /// Settings sent when a session starts: TCP keepalive probes that find a peer gone without
        /// a word within about two minutes (the system default is over two hours), and the time
        /// a transaction may sit idle waiting for its client (`nil`: as long as it likes).
        static func sessionSettings(idleInTransaction: Duration?) -> [(String, String)] {
            var settings = [("tcp_keepalives_idle", "60"), ("tcp_keepalives_interval", "10"), ("tcp_keepalives_count", "6")]
            if let idleInTransaction {
                settings.append(("idle_in_transaction_session_timeout", "\(max(1, idleInTransaction.milliseconds))"))
            }
            return settings
        }

        private static func pool(
            _ configuration: TaskDatabase.PostgresConfiguration, size: Int, name: String, settings: [(String, String)]
        ) -> PostgresClient {
            var options = PostgresClient.Configuration.Options()
            options.maximumConnections = size
            options.connectTimeout = configuration.connectTimeout
            // What `pg_stat_activity.application_name` shows for the pool's connections (the feed's
            // show `taskbroker feed <schema>`).
            options.additionalStartupParameters = [("application_name", name)] + settings
                + (configuration.readOnly ? [("default_transaction_read_only", "on")] : [])
            var clientConfiguration = PostgresClient.Configuration(
                host: configuration.host, port: configuration.port, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: configuration.tls.client
            )
            clientConfiguration.options = options
            return PostgresClient(configuration: clientConfiguration, backgroundLogger: configuration.logger)
        }
    }
}
