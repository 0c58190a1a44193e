import Foundation
import PostgresNIO
import TaskBrokerCore

// The statements that read: queue names, and the actions of queues.
extension PostgresSchema {
    /// A page of queue names after `name` (from the first for `nil`): one probe of the
    /// `(queue_name, position)` index per name (a loose index scan), however many actions each holds.
    func queueNamesQuery(after name: String?, limit: Int) -> PostgresQuery {
        guard let name else {
            return """
                WITH RECURSIVE listed(name) AS (
                    (SELECT queue_name FROM \(unescaped: action) ORDER BY queue_name LIMIT 1)
                    UNION ALL
                    SELECT (SELECT queue_name FROM \(unescaped: action) WHERE queue_name > listed.name ORDER BY queue_name LIMIT 1)
                    FROM listed WHERE listed.name IS NOT NULL
                )
                SELECT name FROM listed WHERE name IS NOT NULL LIMIT \(Int64(limit))
                """
        }
        return """
            WITH RECURSIVE listed(name) AS (
                (SELECT queue_name FROM \(unescaped: action) WHERE queue_name > \(name) ORDER BY queue_name LIMIT 1)
                UNION ALL
                SELECT (SELECT queue_name FROM \(unescaped: action) WHERE queue_name > listed.name ORDER BY queue_name LIMIT 1)
                FROM listed WHERE listed.name IS NOT NULL
            )
            SELECT name FROM listed WHERE name IS NOT NULL LIMIT \(Int64(limit))
            """
    }

    func queueNamesQuery() -> PostgresQuery {
        "SELECT DISTINCT queue_name FROM \(unescaped: action) ORDER BY queue_name"
    }

    /// The stored actions of these queues, in no particular order: the caller sorts each queue by
    /// position. (Sorted here, a read of 256 queues of 100 actions sorted its 25,600 rows, payloads
    /// and all, in a temporary file: two thirds of the statement's time.)
    func tasksQuery(queueNames: [String]) -> PostgresQuery {
        "SELECT \(unescaped: Self.taskColumns) FROM \(unescaped: action) WHERE queue_name = ANY(\(queueNames)::text[]) AND state <> 1"
    }

    /// The first `limit` stored actions of each of these queues after the position given with
    /// it, by position: one index range scan of `(queue_name, position)` per queue, which stops
    /// after `limit` rows whatever the queue's backlog. The rows of a queue come in position order.
    func tasksQuery(queueNames: [String], after positions: [Int64], limit: Int) -> PostgresQuery {
        """
        SELECT t.* FROM unnest(\(queueNames)::text[], \(positions)::int8[]) AS q(name, after)
        CROSS JOIN LATERAL (
            SELECT \(unescaped: Self.taskColumns) FROM \(unescaped: action) a
            WHERE a.queue_name = q.name AND a.position > q.after AND a.state <> 1 ORDER BY a.position LIMIT \(Int64(limit))
        ) t
        """
    }

    /// The first `limit` stored actions of each of these queues, by position, as
    /// ``tasksQuery(queueNames:after:limit:)`` reads them, except that a queue whose lease an owner
    /// other than `owner` holds (not expired) gives its head alone. Each row starts with its queue,
    /// the seconds left on such a lease (`NULL` for the other queues) and whether an operator
    /// paused the queue; a queue with nothing stored gives one row of those with `NULL` action
    /// columns. One statement and one snapshot for the pauses and the actions.
    func tasksQuery(queueNames: [String], limit: Int, readingFor owner: String) -> PostgresQuery {
        """
        SELECT q.name, h.remaining, h.paused, t.* FROM unnest(\(queueNames)::text[]) AS q(name)
        CROSS JOIN LATERAL (
            -- One probe of the queue's row for both; an aggregate, so that a queue without a row
            -- (nothing ever saved to it) still gives one: not held, not paused.
            SELECT max(CASE WHEN l.owner IS DISTINCT FROM \(owner) AND l.expires_at > clock_timestamp()
                            THEN EXTRACT(EPOCH FROM (l.expires_at - clock_timestamp()))::float8 END) AS remaining,
                   coalesce(bool_or(l.paused), false) AS paused
            FROM \(unescaped: queue) l WHERE l.name = q.name
        ) h
        LEFT JOIN LATERAL (
            SELECT \(unescaped: Self.taskColumns) FROM \(unescaped: action) a
            WHERE a.queue_name = q.name AND a.state <> 1 ORDER BY a.position
            LIMIT CASE WHEN h.remaining IS NOT NULL THEN 1 ELSE \(Int64(limit)) END
        ) t ON true
        """
    }
}
