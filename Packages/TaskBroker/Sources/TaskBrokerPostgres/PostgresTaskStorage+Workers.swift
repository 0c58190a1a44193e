public import Foundation
import PostgresNIO
public import TaskBrokerCore

// What an operator reads of the workers and the rate limits: the live leases and the starts in
// their windows, by the server's clock.
extension PostgresTaskStorage {
    /// The brokers that hold queue leases or plain parallel actions now, sorted by owner (see
    /// `TaskStorage.workers()`). Reads the owned rows of the queue and parallel tables.
    public func workers() async throws -> [TaskWorker] {
        try await run("read the workers' leases") {
            try await withConnection { [self] connection in
                var workers: [String: TaskWorker] = [:]
                let leases = try await connection.query(
                    """
                    SELECT owner, name, epoch, extract(epoch FROM expires_at)::double precision FROM \(unescaped: sql.queue)
                    WHERE owner IS NOT NULL AND expires_at > clock_timestamp() ORDER BY owner, name
                    """,
                    logger: logger
                )
                for try await (owner, name, epoch, expires) in leases.decode((String, String, Int64, Double).self) {
                    workers[owner, default: TaskWorker(owner: owner)].queues.append(
                        TaskWorkerLease(queueName: name, epoch: epoch, expiresAt: Date(timeIntervalSince1970: expires))
                    )
                }
                let parallel = try await connection.query(
                    """
                    SELECT owner, count(*)::bigint, extract(epoch FROM max(expires_at))::double precision FROM \(unescaped: sql.parallel)
                    WHERE owner IS NOT NULL AND expires_at > clock_timestamp() GROUP BY owner
                    """,
                    logger: logger
                )
                for try await (owner, count, expires) in parallel.decode((String, Int64, Double).self) {
                    workers[owner, default: TaskWorker(owner: owner)].parallelActions = Int(count)
                    workers[owner, default: TaskWorker(owner: owner)].parallelExpiresAt = Date(timeIntervalSince1970: expires)
                }
                return workers.values.sorted { $0.owner < $1.owner }
            }
        }
    }

    /// The starts of each rate limit's bucket still inside their windows by the server's clock
    /// (see `TaskStorage.rateLimitUsage(now:)`); `now` is not used.
    public func rateLimitUsage(now _: Date) async throws -> [TaskRateUsage] {
        try await run("read the rate limits' starts") {
            try await withConnection { [self] connection in
                var usage: [TaskRateUsage] = []
                let rows = try await connection.query(
                    """
                    SELECT bucket, count(*)::bigint, max(at), max(expires_at) FROM \(unescaped: sql.rateStart)
                    WHERE expires_at > extract(epoch FROM clock_timestamp()) GROUP BY bucket ORDER BY bucket COLLATE "C"
                    """,
                    logger: logger
                )
                for try await (bucket, starts, latest, empty) in rows.decode((String, Int64, Double, Double).self) {
                    usage.append(TaskRateUsage(
                        bucket: bucket, starts: Int(starts),
                        latestStart: Date(timeIntervalSince1970: latest), emptyAt: Date(timeIntervalSince1970: empty)
                    ))
                }
                return usage
            }
        }
    }
}
