import Foundation
import PostgresNIO
import TaskBrokerCore

// The other statements of the queues' actions: saves, claims, leases, brokers, pauses,
// dead letters and snapshots.
extension PostgresSchema {
    /// Upserts actions (distinct keys), creates their queues' rows, and returns each action's
    /// position, new revision and the queue it was in before (if it moved).
    /// A `notBefore` of NaN stands for none (the arrays carry no `NULL`s).
    /// A trace context of `''` stands for none.
    func saveQuery(
        collections: [String], keys: [String], queueNames: [String], payloads: [ByteBuffer], notBefores: [Double], priorities: [Int64],
        traceContexts: [String]
    ) -> PostgresQuery {
        """
        WITH input AS (
            SELECT c, k, q, p, NULLIF(nb, 'NaN'::float8) AS nb, pr, NULLIF(tc, '') AS tc, nextval('\(unescaped: sequence)') AS n
            FROM unnest(\(collections)::text[], \(keys)::text[], \(queueNames)::text[], \(payloads)::bytea[],
                        \(PostgresArray(notBefores))::float8[], \(PostgresArray(priorities))::int8[], \(traceContexts)::text[])
                WITH ORDINALITY AS u(c, k, q, p, nb, pr, tc, i)
            ORDER BY i
        ),
        queues AS (
            INSERT INTO \(unescaped: queue) (name) SELECT DISTINCT q FROM input ON CONFLICT (name) DO NOTHING
        ),
        previous AS (
            SELECT a.collection, a.key, a.queue_name FROM \(unescaped: action) a JOIN input ON a.collection = input.c AND a.key = input.k
        ),
        saved AS (
            INSERT INTO \(unescaped: action) AS a (collection, key, queue_name, payload, position, revision, not_before, priority, trace_context)
            SELECT c, k, q, p, n, n, nb, pr, tc FROM input
            ON CONFLICT (collection, key) DO UPDATE SET
                queue_name = excluded.queue_name, payload = excluded.payload, revision = excluded.revision,
                not_before = excluded.not_before, priority = excluded.priority, trace_context = excluded.trace_context, state = 0,
                attempts = 0, pause_kind = NULL, pause_until = NULL, last_failure = NULL, failed_at = NULL
            RETURNING a.collection, a.key, a.position, a.revision, a.queue_name
        )
        SELECT s.collection, s.key, s.position, s.revision,
               CASE WHEN p.queue_name IS DISTINCT FROM s.queue_name THEN p.queue_name END
        FROM saved s LEFT JOIN previous p ON p.collection = s.collection AND p.key = s.key
        """
    }

    /// Actions saved to run later whose time is after the cursor and no later than `through`,
    /// by (not-before, position): a range scan of the schedule index.
    func scheduledQuery(afterTime: Double, afterPosition: Int64, through: Double, limit: Int) -> PostgresQuery {
        """
        SELECT queue_name, not_before, position FROM \(unescaped: action)
        WHERE not_before IS NOT NULL AND (not_before, position) > (\(afterTime)::float8, \(afterPosition)::int8)
          AND not_before <= \(through)::float8 AND state <> 1
        ORDER BY not_before, position LIMIT \(Int64(limit))
        """
    }

    /// The earliest not-before time after `after` of a ready action.
    func nextNotBeforeQuery(after: Double) -> PostgresQuery {
        """
        SELECT not_before FROM \(unescaped: action)
        WHERE not_before IS NOT NULL AND not_before > \(after)::float8 AND state <> 1
        ORDER BY not_before LIMIT 1
        """
    }

    /// Inserts an action unless its key and collection are stored (ready or a dead letter), and its
    /// queue's row; returns its position and revision when it was inserted. A concurrent insert of
    /// the same key waits for the other transaction and then finds the key taken.
    func saveIfAbsentQuery(_ task: NewTask) -> PostgresQuery {
        """
        WITH queues AS (
            INSERT INTO \(unescaped: queue) (name) VALUES (\(task.queueName)) ON CONFLICT (name) DO NOTHING
        ),
        numbered AS (SELECT nextval('\(unescaped: sequence)') AS n)
        INSERT INTO \(unescaped: action) (collection, key, queue_name, payload, position, revision, not_before, priority, trace_context)
        SELECT \(task.collection), \(task.key), \(task.queueName), \(ByteBuffer(bytes: task.payload)), n, n,
               \(task.notBefore?.timeIntervalSince1970)::float8, \(Int64(task.priority)), \(TaskTraceHeaders.encoded(task.traceContext))::text
        FROM numbered
        ON CONFLICT (collection, key) DO NOTHING
        RETURNING position, revision
        """
    }

    func deleteQuery(collection: String, key: String) -> PostgresQuery {
        "DELETE FROM \(unescaped: action) WHERE collection = \(collection) AND key = \(key) RETURNING \(unescaped: Self.taskColumns)"
    }

    /// Claims each head's queue if the head is still the stored version, not waiting for a
    /// restart, and the queue's lease is free, expired or the claimant's own. Locked rows (another
    /// worker claims or finishes the queue right now) are skipped. One row per head: whether the head is
    /// valid, the new epoch if the lease was taken, the seconds left on the queue's lease, and
    /// whether its holder is another owner.
    func claimQuery(heads: [StoredTask], owner: String, leaseMilliseconds: Int64) -> PostgresQuery {
        """
        WITH head AS (
            SELECT * FROM unnest(\(heads.map(\.queueName))::text[], \(heads.map(\.collection))::text[], \(heads.map(\.key))::text[],
                                 \(heads.map(\.revision))::int8[], \(heads.map { Int32(clamping: $0.attempts) })::int4[])
                AS h(queue_name, collection, key, revision, attempts)
        ),
        free AS (
            -- Locks the queue's row and the head's row and checks both on their newest committed
            -- versions: a head that the lease's last holder completed, failed or that was replaced
            -- after this statement's snapshot is not taken (the snapshot alone would still show it).
            SELECT q.name FROM head
            JOIN \(unescaped: queue) q ON q.name = head.queue_name
            JOIN \(unescaped: action) a
                ON a.collection = head.collection AND a.key = head.key AND a.queue_name = head.queue_name
               AND a.revision = head.revision AND a.attempts = head.attempts AND a.pause_kind IS DISTINCT FROM 2 AND a.state <> 1
            WHERE (q.expires_at <= clock_timestamp() OR q.owner = \(owner)) AND NOT q.paused
            FOR UPDATE OF q, a SKIP LOCKED
        ),
        taken AS (
            UPDATE \(unescaped: queue) q
            SET owner = \(owner), epoch = q.epoch + 1,
                expires_at = clock_timestamp() + \(leaseMilliseconds) * interval '1 millisecond'
            FROM free WHERE q.name = free.name
            RETURNING q.name, q.epoch
        )
        -- The taken queues with their new epoch, then every head as the snapshot shows it (still
        -- stored as claimed; how long the queue's lease has left), which the caller reads for
        -- the heads not taken. Not joined to `taken` here: a join between two CTEs is a nested
        -- loop over both (128 × 128 comparisons for 128 heads, most of the statement's time).
        SELECT t.name, true, t.epoch, NULL::float8, false FROM taken t
        UNION ALL
        SELECT head.queue_name, a.key IS NOT NULL AND NOT coalesce(q.paused, false), NULL::int8,
               CASE WHEN isfinite(q.expires_at) THEN EXTRACT(EPOCH FROM (q.expires_at - clock_timestamp()))::float8 END,
               q.owner IS DISTINCT FROM \(owner)
        FROM head
        LEFT JOIN \(unescaped: action) a
            ON a.collection = head.collection AND a.key = head.key AND a.queue_name = head.queue_name
           AND a.revision = head.revision AND a.attempts = head.attempts AND a.pause_kind IS DISTINCT FROM 2 AND a.state <> 1
        LEFT JOIN \(unescaped: queue) q ON q.name = head.queue_name
        """
    }


    /// Extends the leases the owner still holds under these epochs, without waiting for a lease
    /// row that another transaction has locked; returns the queues the owner still holds: those
    /// renewed, and those whose row was locked (renewed at the next renewal).
    ///
    /// Not waiting is the point: a finish holds its lease rows while its DELETE waits for an
    /// action's row, which a caller's own transaction (`database.write`) may hold for as long as
    /// it likes. A renewal that waited behind it renewed none of the worker's other leases, which
    /// expired, and other workers took over queues whose actions still ran here. A renewal that
    /// never waits cannot deadlock either, whatever order it meets the rows in.
    func renewQuery(queueNames: [String], epochs: [Int64], owner: String, leaseMilliseconds: Int64) -> PostgresQuery {
        """
        WITH wanted AS (
            SELECT * FROM unnest(\(queueNames)::text[], \(epochs)::int8[]) AS l(name, epoch)
        ),
        held AS (
            SELECT q.name FROM \(unescaped: queue) q
            JOIN wanted l ON q.name = l.name AND q.epoch = l.epoch
            WHERE q.owner = \(owner)
            ORDER BY q.name
            FOR NO KEY UPDATE OF q SKIP LOCKED
        ),
        renewed AS (
            UPDATE \(unescaped: queue) q SET expires_at = clock_timestamp() + \(leaseMilliseconds) * interval '1 millisecond'
            FROM held WHERE q.name = held.name
            RETURNING q.name
        )
        SELECT name FROM renewed
        UNION ALL
        SELECT q.name FROM \(unescaped: queue) q
        JOIN wanted l ON q.name = l.name AND q.epoch = l.epoch
        WHERE q.owner = \(owner) AND q.name NOT IN (SELECT name FROM renewed)
        """
    }

    /// Ends the leases `owner` holds under these epochs now; returns the queues released.
    func releaseQuery(queueNames: [String], epochs: [Int64], owner: String) -> PostgresQuery {
        leaseQuery(queueNames: queueNames, epochs: epochs, owner: owner, expiringInMilliseconds: 0)
    }

    /// Sets the expiry of the leases `owner` holds under these epochs; returns their queues. The
    /// rows are locked in name order first, as the finish function locks them (two statements
    /// that lock them in different orders deadlock under load).
    private func leaseQuery(queueNames: [String], epochs: [Int64], owner: String, expiringInMilliseconds milliseconds: Int64) -> PostgresQuery {
        """
        WITH held AS (
            SELECT q.name FROM \(unescaped: queue) q
            JOIN unnest(\(queueNames)::text[], \(epochs)::int8[]) AS l(name, epoch) ON q.name = l.name AND q.epoch = l.epoch
            WHERE q.owner = \(owner)
            ORDER BY q.name
            FOR NO KEY UPDATE OF q
        )
        UPDATE \(unescaped: queue) q SET expires_at = clock_timestamp() + \(milliseconds) * interval '1 millisecond'
        FROM held WHERE q.name = held.name
        RETURNING q.name
        """
    }

    /// Takes the broker table for a registration: two registrations never check at once.
    func lockBrokersQuery() -> PostgresQuery {
        "LOCK TABLE \(unescaped: broker) IN SHARE ROW EXCLUSIVE MODE"
    }

    /// A running prefix broker of another name that overlaps `name` (one is a prefix of the
    /// other, compared as bytes), if any.
    func overlappingBrokerQuery(name: String) -> PostgresQuery {
        """
        SELECT name FROM \(unescaped: broker)
        WHERE prefix AND expires_at > clock_timestamp() AND name <> \(name)
          AND (starts_with(name, \(name)) OR starts_with(\(name), name))
        LIMIT 1
        """
    }

    /// Records a broker of `owner` for `seconds`, and forgets records that expired an hour ago
    /// (their processes died without unregistering).
    func registerBrokerQuery(name: String, owner: String, prefix: Bool, milliseconds: Int64) -> PostgresQuery {
        """
        WITH gone AS (DELETE FROM \(unescaped: broker) WHERE expires_at < clock_timestamp() - interval '1 hour')
        INSERT INTO \(unescaped: broker) (name, owner, prefix, expires_at)
        VALUES (\(name), \(owner), \(prefix), clock_timestamp() + \(milliseconds) * interval '1 millisecond')
        ON CONFLICT (name, owner) DO UPDATE SET prefix = excluded.prefix, expires_at = excluded.expires_at
        """
    }

    /// Keeps the brokers of `owner` alive for `milliseconds` more.
    func refreshBrokersQuery(owner: String, milliseconds: Int64) -> PostgresQuery {
        """
        UPDATE \(unescaped: broker) SET expires_at = clock_timestamp() + \(milliseconds) * interval '1 millisecond'
        WHERE owner = \(owner)
        """
    }

    func unregisterBrokerQuery(name: String, owner: String) -> PostgresQuery {
        "DELETE FROM \(unescaped: broker) WHERE name = \(name) AND owner = \(owner)"
    }

    func resumeQuery(queueNames: [String]) -> PostgresQuery {
        """
        UPDATE \(unescaped: action) SET pause_kind = NULL, pause_until = NULL
        WHERE queue_name = ANY(\(queueNames)::text[]) AND pause_kind IS NOT NULL AND state <> 1
        RETURNING \(unescaped: Self.taskColumns)
        """
    }

    func purgeQuery(queueName: String) -> PostgresQuery {
        """
        WITH deleted AS (DELETE FROM \(unescaped: action) WHERE queue_name = \(queueName) RETURNING 1)
        SELECT count(*)::int8 FROM deleted
        """
    }

    /// Marks queues paused by an operator (creating their rows), or clears the mark; returns the
    /// queues whose mark changed. The rows are locked in name order, as every statement that waits
    /// for a queue's row locks them (two statements that lock rows in different orders deadlock).
    func setPausedQuery(queueNames: [String], paused: Bool) -> PostgresQuery {
        guard paused else {
            return """
                WITH locked AS (
                    SELECT name FROM \(unescaped: queue) WHERE name = ANY(\(queueNames)::text[]) AND paused
                    ORDER BY name FOR NO KEY UPDATE
                )
                UPDATE \(unescaped: queue) q SET paused = false FROM locked WHERE q.name = locked.name RETURNING q.name
                """
        }
        return """
        WITH wanted AS (SELECT DISTINCT name FROM unnest(\(queueNames)::text[]) AS w(name)),
        before AS (SELECT q.name, q.paused FROM \(unescaped: queue) q JOIN wanted USING (name)),
        marked AS (
            INSERT INTO \(unescaped: queue) (name, paused) SELECT name, true FROM wanted ORDER BY name
            ON CONFLICT (name) DO UPDATE SET paused = excluded.paused
            RETURNING name
        )
        SELECT m.name FROM marked m LEFT JOIN before b USING (name) WHERE b.paused IS DISTINCT FROM true
        """
    }

    /// The queues among these (or of all, for `nil`) that an operator paused.
    func pausedQueuesQuery(queueNames: [String]?) -> PostgresQuery {
        guard let queueNames else { return "SELECT name FROM \(unescaped: queue) WHERE paused" }
        return "SELECT name FROM \(unescaped: queue) WHERE paused AND name = ANY(\(queueNames)::text[])"
    }

    /// The action with this key and collection, and its state (the last column).
    func lookupQuery(collection: String, key: String) -> PostgresQuery {
        "SELECT \(unescaped: Self.taskColumns), state FROM \(unescaped: action) WHERE collection = \(collection) AND key = \(key)"
    }

    /// Dead letters of one queue (or all), by queue and position.
    func deadLettersQuery(queueName: String?) -> PostgresQuery {
        guard let queueName else {
            return "SELECT \(unescaped: Self.taskColumns) FROM \(unescaped: action) WHERE state = 1 ORDER BY queue_name, position"
        }
        return """
            SELECT \(unescaped: Self.taskColumns) FROM \(unescaped: action)
            WHERE queue_name = \(queueName) AND state = 1 ORDER BY position
            """
    }

    /// Puts a dead letter back in its queue as a new save (new revision, attempts from zero).
    func replayDeadLetterQuery(collection: String, key: String) -> PostgresQuery {
        """
        UPDATE \(unescaped: action) SET state = 0, attempts = 0, pause_kind = NULL, pause_until = NULL,
            last_failure = NULL, failed_at = NULL, revision = nextval('\(unescaped: sequence)')
        WHERE collection = \(collection) AND key = \(key) AND state = 1
        RETURNING \(unescaped: Self.taskColumns)
        """
    }

    func discardDeadLetterQuery(collection: String, key: String) -> PostgresQuery {
        """
        DELETE FROM \(unescaped: action) WHERE collection = \(collection) AND key = \(key) AND state = 1
        RETURNING \(unescaped: Self.taskColumns)
        """
    }

    /// The number of dead letters per queue.
    func deadLetterCountsQuery() -> PostgresQuery {
        "SELECT queue_name, count(*)::int8 FROM \(unescaped: action) WHERE state = 1 GROUP BY queue_name"
    }

    /// Per queue: pending count, the head's attempts, pause and last failure, and when the
    /// longest-waiting action was saved.
    func snapshotQuery() -> PostgresQuery {
        """
        SELECT DISTINCT ON (queue_name) queue_name, count(*) OVER (PARTITION BY queue_name), attempts, pause_kind, pause_until,
               last_failure, failed_at, min(saved_at) OVER (PARTITION BY queue_name)
        FROM \(unescaped: action) WHERE state <> 1
        ORDER BY queue_name, pause_kind IS NULL, position
        """
    }

    func notifyQuery(payloads: [String]) -> PostgresQuery {
        "SELECT pg_notify(\(channel), payload) FROM unnest(\(payloads)::text[]) AS payload"
    }
}
