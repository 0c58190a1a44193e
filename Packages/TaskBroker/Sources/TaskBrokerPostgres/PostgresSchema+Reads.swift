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
    /// the seconds left on such a lease (`NULL` for the other queues), whether an operator paused
    /// the queue, and `NULL` for the epoch; a queue with nothing stored gives one row of those with
    /// `NULL` action columns. One statement and one snapshot for the pauses and the actions.
    ///
    /// With a `claimBudget` above zero, the statement also takes the lease of up to that many of
    /// the queues, in the order given, as ``claimQuery(heads:owner:leaseMilliseconds:)`` does: a
    /// queue whose lease has expired (whoever held it), that no operator paused, and whose head as
    /// the snapshot shows it is not paused, is due by `now` (seconds since 1970) and is still
    /// stored as read, on its newest committed version (its row and the queue's are locked,
    /// `SKIP LOCKED`: a queue another statement is claiming or finishing is left to it). Each
    /// lease taken gives a row of its own: the queue, `NULL`, `false`, the lease's new epoch and
    /// `NULL` action columns. Without a budget the statement changes nothing (and takes no lock).
    func tasksQuery(
        queueNames: [String], limit: Int, readingFor owner: String, claimBudget: Int, leaseMilliseconds: Int64, now: Double
    ) -> PostgresQuery {
        let read = """
            SELECT q.name, h.remaining, h.paused, NULL::int8, t.* FROM listed q
            CROSS JOIN LATERAL (
                -- One probe of the queue's row for both; an aggregate, so that a queue without a row
                -- (nothing ever saved to it) still gives one: not held, not paused.
                SELECT max(CASE WHEN l.owner IS DISTINCT FROM q.reader AND l.expires_at > clock_timestamp()
                                THEN EXTRACT(EPOCH FROM (l.expires_at - clock_timestamp()))::float8 END) AS remaining,
                       coalesce(bool_or(l.paused), false) AS paused
                FROM \(queue) l WHERE l.name = q.name
            ) h
            LEFT JOIN LATERAL (
                SELECT \(Self.taskColumns) FROM \(action) a
                WHERE a.queue_name = q.name AND a.state <> 1 ORDER BY a.position
                LIMIT CASE WHEN h.remaining IS NOT NULL THEN 1 ELSE \(max(1, limit)) END
            ) t ON true
            """
        guard claimBudget > 0 else {
            return """
                WITH listed AS (SELECT q.name, \(owner)::text AS reader FROM unnest(\(queueNames)::text[]) AS q(name))
                \(unescaped: read)
                """
        }
        return """
            WITH listed AS MATERIALIZED (
                SELECT q.name, q.i, \(owner)::text AS reader FROM unnest(\(queueNames)::text[]) WITH ORDINALITY AS q(name, i)
            ),
            head AS MATERIALIZED (
                -- Each queue's head as the snapshot shows it, if it may run now.
                SELECT q.i, q.name, h.position, h.revision, h.attempts FROM listed q
                CROSS JOIN LATERAL (
                    SELECT a.position, a.revision, a.attempts, a.pause_kind, a.not_before FROM \(unescaped: action) a
                    WHERE a.queue_name = q.name AND a.state <> 1 ORDER BY a.position LIMIT 1
                ) h
                WHERE h.pause_kind IS NULL AND (h.not_before IS NULL OR h.not_before <= \(now)::float8)
            ),
            free AS (
                SELECT l.name FROM head
                JOIN \(unescaped: queue) l ON l.name = head.name
                JOIN \(unescaped: action) a
                    ON a.position = head.position AND a.revision = head.revision AND a.attempts = head.attempts
                   AND a.pause_kind IS NULL AND a.state <> 1
                WHERE l.expires_at <= clock_timestamp() AND NOT l.paused
                ORDER BY head.i LIMIT \(Int64(claimBudget))
                FOR UPDATE OF l, a SKIP LOCKED
            ),
            taken AS (
                UPDATE \(unescaped: queue) l
                SET owner = \(owner), epoch = l.epoch + 1, expires_at = clock_timestamp() + \(leaseMilliseconds) * interval '1 millisecond'
                FROM free WHERE l.name = free.name
                RETURNING l.name, l.epoch
            )
            -- The leases taken, padded with an action's columns (none) so that both parts have one row type.
            SELECT k.name, NULL::float8, false, k.epoch, t.* FROM taken k
            LEFT JOIN LATERAL (SELECT \(unescaped: Self.taskColumns) FROM \(unescaped: action) WHERE false) t ON true
            UNION ALL
            \(unescaped: read)
            """
    }
}
