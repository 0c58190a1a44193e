import Logging
import PostgresNIO
import Synchronization
import TaskBrokerCore

// Lease renewals and releases, on the lease pool (``PostgresTaskStorage/leaseClient``).
extension PostgresTaskStorage {
    /// Extends the leases `owner` holds on queues whose actions still run; returns those it lost.
    /// A lease whose row another transaction holds is not waited for (see `PostgresSchema.renewQuery`).
    public func renew(_ queueNames: [String], owner: String, leaseDuration: Duration) async throws -> [String] {
        guard !queueNames.isEmpty else { return [] }
        return try await renew(heldLeases(queueNames, owner: owner), owner: owner)
    }

    /// The queues among `queueNames` whose leases `owner` holds, with their epochs, as this
    /// storage knows them: what a renewal renews.
    func heldLeases(_ queueNames: [String], owner: String) -> [(queueName: String, epoch: Int64)] {
        epochs.withLock { epochs in
            let held = epochs[owner] ?? [:]
            return queueNames.compactMap { name in held[name].map { (name, $0) } }
        }
    }

    /// Extends these leases (read by ``heldLeases(_:owner:)`` before: a finish may commit in
    /// between); returns those lost.
    func renew(_ held: [(queueName: String, epoch: Int64)], owner: String) async throws -> [String] {
        guard !held.isEmpty else { return [] }
        let lease = configuration.leaseDuration
        let renewed = try await run("renew \(held.count) lease(s)") {
            // Renewed once committed (see `committed(_:)`). A renewal that waits longer than a
            // quarter of the lease gives up, so that the broker's next try (a twelfth of the lease
            // later) still comes before the lease ends.
            try await committed(within: renewalLimit, on: leaseClient) { [self] connection in
                let rows = try await connection.query(
                    sql.renewQuery(queueNames: held.map(\.queueName), epochs: held.map(\.epoch), owner: owner, leaseMilliseconds: lease.milliseconds),
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
        let (lost, releasedMeanwhile) = epochs.withLock { epochs in
            // A lease released meanwhile (its outcome stored) is not lost.
            let lost = held.filter { !renewed.contains($0.queueName) && epochs[owner]?[$0.queueName] == $0.epoch }
            // The finish of its action released it after the leases were read, and the renewal
            // then extended it again (same owner, same epoch): other workers would wait a whole
            // lease for a queue this worker let go.
            let releasedMeanwhile = held.filter { renewed.contains($0.queueName) && epochs[owner]?[$0.queueName] != $0.epoch }
            return (lost.map(\.queueName), releasedMeanwhile)
        }
        if !releasedMeanwhile.isEmpty {
            do {
                // Under the renewed epochs: a lease this worker claimed anew since is left alone.
                // Within the renewal's own limit: the next renewal waits for this one.
                try await releaseLeases(releasedMeanwhile, owner: owner, within: renewalLimit)
            } catch {
                // Nothing stored is at stake: those leases expire after one lease, as a dead worker's do.
                logger.debug("could not release again \(releasedMeanwhile.count) lease(s) that the renewal extended after their release: \(error)")
            }
        }
        return lost
    }

    /// Ends the leases of a claim that `owner` will not use, and notifies the queues so that
    /// workers waiting for those leases claim them at once (see `TaskStorage.release(_:owner:)`).
    public func release(_ queueNames: [String], owner: String) async throws {
        let held = epochs.withLock { epochs in
            queueNames.compactMap { name in epochs[owner]?.removeValue(forKey: name).map { (queueName: name, epoch: $0) } }
        }
        try await releaseLeases(held, owner: owner)
    }

    /// How long a renewal, and the release that may follow it, may wait for the server: a quarter
    /// of the lease (see `renew(_:owner:)`), or `operationTimeout` if shorter.
    var renewalLimit: Duration {
        min(configuration.operationTimeout, configuration.leaseDuration / 4)
    }

    /// Ends these leases if `owner` still holds them under these epochs, and notifies their queues.
    func releaseLeases(
        _ held: [(queueName: String, epoch: Int64)], owner: String, within timeout: Duration? = nil
    ) async throws {
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
