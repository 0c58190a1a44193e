import PostgresNIO
public import TaskBrokerCore

extension TaskDatabase {
    /// Connects to PostgreSQL, creates or migrates TaskBroker's tables (in
    /// `PostgresConfiguration/schema`), and returns a database that brokers in any number of
    /// processes and machines share.
    ///
    /// ```swift
    /// let database = try await TaskDatabase.postgres(configuration: .init(url: "postgres://app:secret@db/app"))
    /// let broker = try await TaskQueueBroker.setup(database: database, name: "mail", handler: handler)
    /// ```
    ///
    /// Brokers of the same name in different processes (or on different `TaskDatabase`s of one
    /// process) are workers of one pool: each queue runs one action at a time across all of them,
    /// in order. Setting up the same name twice on one `TaskDatabase` is still an error.
    ///
    /// - Parameter configuration: Where and how to connect.
    /// - Returns: The database.
    /// - Throws: `TaskBrokerError` with code `.connectionFailed` (naming the host and what to check:
    ///   the password, the database name, whether the server runs) when the server cannot be
    ///   reached or refuses, `.invalidConfiguration` for an unusable schema name or lease,
    ///   `.incompatibleSchema` when a newer TaskBroker wrote the schema, `.storageFailed` when the
    ///   tables cannot be created.
    public static func postgres(configuration: PostgresConfiguration) async throws -> TaskDatabase {
        TaskDatabase(storage: try await PostgresTaskStorage.connect(configuration))
    }

    /// Runs `body` in one PostgreSQL transaction: save and delete actions together with your own
    /// rows, on the same connection, committed together or not at all.
    ///
    /// ```swift
    /// try await database.write { tx in
    ///     try await tx.execute("INSERT INTO message (id, body) VALUES (\(id), \(body))")
    ///     try await tx.save(MessageSendAction(key: id, collection: "messages", queueName: "handler1-q"))
    /// }
    /// ```
    ///
    /// Change TaskBroker's own tables only through `tx`. Brokers everywhere wake after the commit.
    ///
    /// - Parameter body: Your transaction; throw to roll everything back.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws (unchanged), or `TaskBrokerError` with code `.storageFailed`,
    ///   or `.unsupported` when this database is not the PostgreSQL backend.
    public func write<T: Sendable>(_ body: @Sendable (PostgresTaskTransaction) async throws -> T) async throws -> T {
        guard let postgres = storage as? PostgresTaskStorage else {
            throw TaskBrokerError(
                code: .unsupported,
                message: "write(_:) with a PostgresTaskTransaction needs the PostgreSQL backend (TaskDatabase.postgres)."
            )
        }
        do {
            return try await postgres.run("run the transaction") {
                try await postgres.transactionClient.withConnection { connection in
                    try await PostgresTaskStorage.inTransaction(connection, logger: postgres.logger) { connection in
                        do {
                            return try await body(PostgresTaskTransaction(connection: connection, storage: postgres))
                        } catch {
                            throw UserCodeFailed(error: error)
                        }
                    }
                }
            }
        } catch let failed as UserCodeFailed {
            throw failed.error
        }
    }
}
