import Foundation
import GRDB
import TaskBrokerCore

// Rate limits: the starts recorded per bucket, rows of `taskbroker_rate_start`.
extension SQLiteTaskStorage {
    func acquireStarts(bucket: String, limit: Int, period: Duration, count: Int, now: Date) async throws -> TaskRateGrant {
        try await write("record starts of rate limit \(bucket)", announcing: { (_: TaskRateGrant) in [] }) { db in
            // The write transaction holds the file's one writer: no other process counts at once.
            let time = now.timeIntervalSince1970
            let windowStart = time - period.timeInterval + RateWindow.tolerance
            try db.execute(sql: "DELETE FROM taskbroker_rate_start WHERE bucket = ? AND at <= ?", arguments: [bucket, windowStart])
            // Every bucket's starts that left their windows (those of buckets no one asks again).
            try db.execute(sql: "DELETE FROM taskbroker_rate_start WHERE expires_at <= ?", arguments: [time + RateWindow.tolerance])
            let row = try Row.fetchOne(
                db, sql: "SELECT count(*) AS used, min(at) AS oldest FROM taskbroker_rate_start WHERE bucket = ?",
                arguments: [bucket]
            )
            let grant = RateWindow(
                used: row?["used"] ?? 0, oldest: row?["oldest"], now: time, limit: limit, period: period.timeInterval
            ).grant(count)
            let insert = try db.cachedStatement(sql: "INSERT INTO taskbroker_rate_start (bucket, at, expires_at) VALUES (?, ?, ?)")
            for _ in 0..<grant.granted {
                try insert.execute(arguments: [bucket, time, time + period.timeInterval])
            }
            return grant
        }
    }

    func releaseStarts(bucket: String, at: Date, count: Int) async throws {
        guard count > 0 else { return }
        _ = try await write("give back starts of rate limit \(bucket)", announcing: { (_: Bool) in [] }) { db in
            // The starts of one grant share its time; a microsecond either way covers a Date's rounding.
            let time = at.timeIntervalSince1970
            try db.execute(
                sql: """
                    DELETE FROM taskbroker_rate_start WHERE rowid IN (
                        SELECT rowid FROM taskbroker_rate_start WHERE bucket = ? AND at BETWEEN ? AND ? LIMIT ?)
                    """,
                arguments: [bucket, time - 1e-6, time + 1e-6, count]
            )
            return true
        }
    }
}

extension SQLiteTaskStorage {
    func rateLimitUsage(now: Date) async throws -> [TaskRateUsage] {
        try await Self.run("read the rate limits' starts") {
            try await pool.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT bucket, count(*) AS starts, max(at) AS latest, max(expires_at) AS empty FROM taskbroker_rate_start
                        WHERE expires_at > ? GROUP BY bucket ORDER BY bucket
                        """,
                    arguments: [now.timeIntervalSince1970]
                ).map { row in
                    TaskRateUsage(
                        bucket: row["bucket"], starts: row["starts"],
                        latestStart: Date(timeIntervalSince1970: row["latest"]), emptyAt: Date(timeIntervalSince1970: row["empty"])
                    )
                }
            }
        }
    }
}
