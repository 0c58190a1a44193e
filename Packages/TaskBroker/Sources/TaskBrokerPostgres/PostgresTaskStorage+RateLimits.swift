public import Foundation
import PostgresNIO
public import TaskBrokerCore

// Rate limits: the starts recorded per bucket, rows of the `rate_start` table, counted by the
// server's clock so that every process and machine shares one window.
extension PostgresTaskStorage {
    /// Records up to `count` starts in a bucket (see
    /// `TaskStorage.acquireStarts(bucket:limit:period:count:now:)`); `now` is not used: the
    /// server's clock is. A transaction-level advisory lock on the bucket makes processes asking
    /// at once count one after another.
    public func acquireStarts(
        bucket: String, limit: Int, period: Duration, count: Int, now _: Date
    ) async throws -> TaskRateGrant {
        let lockKey = "\(sql.schema)/rate/\(bucket)"
        let periodSeconds = Double(period.components.seconds) + Double(period.components.attoseconds) / 1e18
        return try await transaction("record starts of rate limit \(bucket)", on: writeClient) { [self] connection in
            var now = 0.0
            for try await value in try await connection.query(
                "SELECT pg_advisory_xact_lock(hashtextextended(\(lockKey), 0))::text, extract(epoch FROM clock_timestamp())::double precision",
                logger: logger
            ).decode((String, Double).self) {
                now = value.1
            }
            try await connection.execute(
                "DELETE FROM \(unescaped: sql.rateStart) WHERE bucket = \(bucket) AND at <= \(now - periodSeconds + RateWindow.tolerance)", logger: logger
            )
            // Every bucket's starts that left their windows (those of buckets no one asks again).
            try await connection.execute(
                "DELETE FROM \(unescaped: sql.rateStart) WHERE expires_at <= \(now + RateWindow.tolerance)", logger: logger
            )
            var window = RateWindow(used: 0, oldest: nil, now: now, limit: limit, period: periodSeconds)
            for try await (used, oldest) in try await connection.query(
                "SELECT count(*)::bigint, min(at) FROM \(unescaped: sql.rateStart) WHERE bucket = \(bucket)", logger: logger
            ).decode((Int64, Double?).self) {
                window.used = Int(used)
                window.oldest = oldest
            }
            let grant = window.grant(count)
            if grant.granted > 0 {
                try await connection.execute(
                    "INSERT INTO \(unescaped: sql.rateStart) (bucket, at, expires_at) SELECT \(bucket), \(now), \(now + periodSeconds) FROM generate_series(1, \(grant.granted))",
                    logger: logger
                )
            }
            return grant
        }
    }

    /// Gives back starts recorded at `at` that did not happen (see
    /// `TaskStorage.releaseStarts(bucket:at:count:)`).
    public func releaseStarts(bucket: String, at: Date, count: Int) async throws {
        guard count > 0 else { return }
        let time = at.timeIntervalSince1970
        try await transaction("give back starts of rate limit \(bucket)", on: writeClient) { [self] connection in
            // The starts of one grant share its time (the server's clock, to the microsecond); a
            // microsecond either way covers a Date's rounding.
            try await connection.execute(
                """
                DELETE FROM \(unescaped: sql.rateStart) WHERE ctid IN (
                    SELECT ctid FROM \(unescaped: sql.rateStart) WHERE bucket = \(bucket) AND at BETWEEN \(time - 1e-6) AND \(time + 1e-6) LIMIT \(count))
                """,
                logger: logger
            )
        }
    }
}
