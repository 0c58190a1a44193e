import Logging
import PostgresNIO
public import TaskBrokerCore

// Lease renewals and releases, on the lease pool (``PostgresTaskStorage/leaseClient``).
extension PostgresTaskStorage {
    /// Extends the leases `owner` holds, under their epochs, on queues whose actions still run;
    /// returns those it no longer holds. A lease whose row another transaction holds is not waited
    /// for (see `PostgresSchema.renewQuery`).
    public func renew(_ leases: [TaskQueueLease], owner: String, leaseDuration: Duration) async throws -> [TaskQueueLease] {
        guard !leases.isEmpty else { return [] }
        let lease = configuration.leaseDuration
        let renewed = try await run("renew \(leases.count) lease(s)") {
            // Renewed once committed (see `committed(_:)`). A renewal that waits longer than a
            // quarter of the lease gives up, so that the broker's next try (a twelfth of the lease
            // later) still comes before the lease ends.
            try await committed(within: renewalLimit, on: leaseClient) { [self] connection in
                let rows = try await connection.query(
                    sql.renewQuery(
                        queueNames: leases.map(\.queueName), epochs: leases.map(\.epoch), owner: owner, leaseMilliseconds: lease.milliseconds
                    ),
                    logger: logger
                )
                // Renewed, or still held with its row locked (a finish of it under way): not lost.
                var renewed: Set<String> = []
                for try await name in rows.decode(String.self) {
                    renewed.insert(name)
                }
                return renewed
            }
        }
        return leases.filter { !renewed.contains($0.queueName) }
    }

    /// Ends the leases of a claim that `owner` will not use, and notifies the queues so that
    /// workers waiting for those leases claim them at once (see `TaskStorage.release(_:owner:)`).
    public func release(_ leases: [TaskQueueLease], owner: String) async throws {
        try await releaseLeases(leases, owner: owner)
    }

    /// How long a renewal may wait for the server: a quarter of the lease (see
    /// `renew(_:owner:leaseDuration:)`), or `operationTimeout` if shorter.
    var renewalLimit: Duration {
        min(configuration.operationTimeout, configuration.leaseDuration / 4)
    }

    /// Ends these leases if `owner` still holds them under these epochs, and notifies their queues.
    func releaseLeases(_ held: [TaskQueueLease], owner: String, within timeout: Duration? = nil) async throws {
        guard !held.isEmpty else { return }
        try await transaction("release \(held.count) lease(s)", within: timeout, on: leaseClient) { [self] connection in
            var released: [String] = []
            let rows = try await connection.query(
                sql.releaseQuery(queueNames: held.map(\.queueName), epochs: held.map(\.epoch), owner: owner), logger: logger
            )
            for try await name in rows.decode(String.self) {
                released.append(name)
            }
            try await notify(ChangeMessage.chunks(queues: released.sorted()), on: connection)
        }
    }
}
