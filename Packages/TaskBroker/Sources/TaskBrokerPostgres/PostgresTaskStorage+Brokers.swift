import PostgresNIO
public import TaskBrokerCore

/// The brokers running on the schema, across processes (see ``SharedBrokerNames``). Each storage
/// records its brokers under its `origin`; while its change feed runs it keeps the records alive
/// every heartbeat interval (``refreshBrokerRecords()``), so the record of a process that died
/// expires after ``brokerRecordLifetime`` (three intervals), and one that shuts down deletes its own.
extension PostgresTaskStorage: SharedBrokerNames {
    /// How long a broker's record lasts unless renewed (``refreshBrokerRecords()``, every heartbeat interval).
    var brokerRecordLifetime: Duration {
        configuration.heartbeatInterval * 3
    }

    /// Records a broker, refusing a prefix broker of another name that runs anywhere and overlaps
    /// it (names compared as bytes).
    public func registerBroker(name: String, claimsPrefix: Bool) async throws {
        let lifetime = brokerRecordLifetime.milliseconds
        // On your transactions' pool: a lock, a read and a write, with the client between them,
        // where the broker's own sessions end a transaction idle for half a lease (400 ms in a
        // test with a lease of 800 ms, which closed a registration under load).
        let overlapping = try await transaction("record broker \(name)", on: writeClient) { [self] connection -> String? in
            try await connection.execute(sql.lockBrokersQuery(), logger: logger)
            if claimsPrefix {
                // Read to the end (at most one row): a result left unread holds the next statement back.
                var overlapping: String?
                for try await other in try await connection.query(sql.overlappingBrokerQuery(name: name), logger: logger).decode(String.self) {
                    overlapping = other
                }
                if let overlapping { return overlapping }
            }
            try await connection.execute(
                sql.registerBrokerQuery(name: name, owner: origin, prefix: claimsPrefix, milliseconds: lifetime), logger: logger
            )
            return nil
        }
        if let overlapping {
            throw TaskBrokerError(
                code: .queueAlreadyClaimed,
                message: "Broker \"\(name)\" would claim queues that broker \"\(overlapping)\" claims, which runs in another process on schema \(configuration.schema) at \(configuration.endpoint) (one name is a prefix of the other); pick names that are not prefixes of each other, or claim with a filter."
            )
        }
    }

    /// Extends the life of this storage's broker records (a failure is logged: the next try comes
    /// an interval later, and a record lasts three).
    func refreshBrokerRecords() async {
        let lifetime = brokerRecordLifetime.milliseconds
        do {
            try await transaction("keep the broker records alive", within: renewalLimit) { [self] connection in
                // Not worth a wait for the disk: a refresh lost in a crash is made again.
                try await connection.execute("SET LOCAL synchronous_commit TO off", logger: logger)
                try await connection.execute(sql.refreshBrokersQuery(owner: origin, milliseconds: lifetime), logger: logger)
            }
        } catch {
            logger.debug("could not keep the broker records alive (tried again in \(configuration.heartbeatInterval)): \(error)")
        }
    }

    /// Deletes a broker's record; gives up after a quarter of the lease (a record left behind
    /// expires after three heartbeats).
    public func unregisterBroker(name: String) async {
        do {
            try await transaction("forget broker \(name)", within: renewalLimit) { [self] connection in
                try await connection.execute(sql.unregisterBrokerQuery(name: name, owner: origin), logger: logger)
            }
        } catch {
            logger.debug("could not delete the record of broker \(name) (it expires on its own): \(error)")
        }
    }
}
