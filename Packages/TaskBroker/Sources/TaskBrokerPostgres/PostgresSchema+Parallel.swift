import Foundation
import NIOCore
import PostgresNIO
import TaskBrokerCore

// Plain parallel actions: the table, and the statements that save, claim (`FOR UPDATE SKIP
// LOCKED`, a batch at a time), finish, renew and release them.
extension PostgresSchema {
    /// Version 10's statements: the table of plain parallel actions and its indexes.
    ///
    /// - `parallel_ready`: the ready actions by (priority descending, position): a claim reads the
    ///   first rows of it, skipping those under a live claim or another transaction's lock.
    /// - `parallel_schedule`, `parallel_claimed`: the next not-before time and the next expiry of
    ///   a claim, when a broker has nothing ready.
    /// - `parallel_queue`: per queue, for counts, listings and dead letters.
    ///
    /// No index holds `owner` or `expires_at`, so that a claim, which sets them, is a HOT update
    /// (no index entry is written; `fillfactor` leaves room on the page for it). When each owner's
    /// claims expire at the latest is the table `parallel_owner`, one row per worker, raised by
    /// every claim and renewal: an idle worker learns from it when a dead worker's actions come
    /// free, without reading the actions.
    var parallelTableDefinition: [String] {
        [
            """
            CREATE TABLE IF NOT EXISTS \(parallel) (
                collection text NOT NULL,
                key text NOT NULL,
                queue_name text NOT NULL,
                payload bytea NOT NULL,
                position bigint NOT NULL,
                revision bigint NOT NULL,
                attempts integer NOT NULL DEFAULT 0,
                not_before double precision,
                priority bigint NOT NULL DEFAULT 0,
                state smallint NOT NULL DEFAULT 0,
                last_failure text,
                failed_at double precision,
                saved_at double precision DEFAULT extract(epoch FROM now()),
                owner text,
                token bigint NOT NULL DEFAULT 0,
                expires_at timestamptz NOT NULL DEFAULT '-infinity',
                PRIMARY KEY (collection, key)
            ) WITH (fillfactor = 70)
            """,
            "CREATE INDEX IF NOT EXISTS parallel_ready ON \(parallel) (priority DESC, position) WHERE state = 0",
            "CREATE INDEX IF NOT EXISTS parallel_schedule ON \(parallel) (not_before) WHERE state = 0 AND not_before IS NOT NULL",
            "CREATE INDEX IF NOT EXISTS parallel_queue ON \(parallel) (queue_name, state)",
            "CREATE TABLE IF NOT EXISTS \(parallelOwner) (owner text PRIMARY KEY, expires_at timestamptz NOT NULL)",
            // The paused queues, so that a claim with none paused looks at no queue per row.
            "CREATE INDEX IF NOT EXISTS queue_paused ON \(queue) (name) WHERE paused",
        ] + parallelFunctions
    }

    /// The statements that find the rows of a batch by key (finish, complete, renew, release), as
    /// functions: PostgreSQL plans a statement with its arrays' real lengths, and for a batch of
    /// about a thousand chose a hash join over the whole table (64 ms a finish over 100,000 rows,
    /// against 4 ms by index). The functions plan with hash and merge joins off: one index look-up
    /// per row, whatever the table holds.
    var parallelFunctions: [String] {
        let noScan = "SET enable_hashjoin = off SET enable_mergejoin = off"
        return [
            """
            CREATE OR REPLACE FUNCTION \(schemaQualified("parallel_complete"))(p_owner text, p_c text[], p_k text[], p_t int8[])
            RETURNS TABLE (collection text, key text) LANGUAGE sql \(noScan) AS $$
                DELETE FROM \(parallel) a USING unnest(p_c, p_k, p_t) AS i(c, k, t)
                WHERE a.collection = i.c AND a.key = i.k AND a.token = i.t AND a.owner = p_owner
                RETURNING a.collection, a.key
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION \(schemaQualified("parallel_finish"))(
                p_owner text, p_c text[], p_k text[], p_r int8[], p_t int8[], p_kind int2[], p_at float8[], p_reason text[], p_fa float8[]
            ) RETURNS TABLE (collection text, key text) LANGUAGE sql \(noScan) AS $$
                WITH input AS (
                    SELECT * FROM unnest(p_c, p_k, p_r, p_t, p_kind, p_at, p_reason, p_fa) AS u(c, k, r, t, kind, at, reason, fa)
                ),
                done AS (
                    DELETE FROM \(parallel) a USING input i
                    WHERE i.kind = 0 AND a.collection = i.c AND a.key = i.k AND a.revision = i.r AND a.token = i.t AND a.owner = p_owner
                    RETURNING a.collection, a.key
                ),
                failed AS (
                    UPDATE \(parallel) a SET \(Self.failedParallelColumns),
                        owner = NULL, expires_at = '-infinity'
                    FROM input i
                    WHERE i.kind <> 0 AND a.collection = i.c AND a.key = i.k AND a.revision = i.r AND a.token = i.t AND a.owner = p_owner
                    RETURNING a.collection, a.key
                )
                SELECT collection, key FROM done UNION ALL SELECT collection, key FROM failed
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION \(schemaQualified("parallel_renew"))(
                p_owner text, p_c text[], p_k text[], p_r int8[], p_t int8[], p_ms int8
            ) RETURNS TABLE (collection text, key text) LANGUAGE sql \(noScan) AS $$
                WITH renewed AS (
                    UPDATE \(parallel) a SET expires_at = clock_timestamp() + p_ms * interval '1 millisecond'
                    FROM unnest(p_c, p_k, p_r, p_t) AS i(c, k, r, t)
                    WHERE a.collection = i.c AND a.key = i.k AND a.revision = i.r AND a.token = i.t AND a.owner = p_owner
                    RETURNING a.collection, a.key
                ),
                latest AS (
                    INSERT INTO \(parallelOwner) AS o (owner, expires_at)
                    SELECT p_owner, clock_timestamp() + p_ms * interval '1 millisecond' WHERE EXISTS (SELECT 1 FROM renewed)
                    ON CONFLICT (owner) DO UPDATE SET expires_at = greatest(o.expires_at, excluded.expires_at)
                )
                SELECT collection, key FROM renewed
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION \(schemaQualified("parallel_release"))(p_owner text, p_c text[], p_k text[], p_t int8[])
            RETURNS SETOF text LANGUAGE sql \(noScan) AS $$
                UPDATE \(parallel) a SET owner = NULL, expires_at = '-infinity'
                FROM unnest(p_c, p_k, p_t) AS i(c, k, t)
                WHERE a.collection = i.c AND a.key = i.k AND a.token = i.t AND a.owner = p_owner
                RETURNING a.queue_name
            $$
            """,
        ]
    }

    /// The table of each claiming worker's latest claim expiry.
    var parallelOwner: String { schemaQualified("parallel_owner") }

    /// A name in this schema, quoted.
    func schemaQualified(_ name: String) -> String {
        "\"\(schema)\".\(name)"
    }

    /// The columns ``task(_:)`` reads, from the parallel table (no pause of its own).
    static let parallelColumns = """
        collection, key, queue_name, payload, position, revision, attempts, NULL::int2, NULL::float8, \
        not_before, priority, last_failure, failed_at, trace_context
        """

    /// The same columns, of the row `a`.
    static let parallelColumnsOfA = """
        a.collection, a.key, a.queue_name, a.payload, a.position, a.revision, a.attempts, NULL::int2, NULL::float8, \
        a.not_before, a.priority, a.last_failure, a.failed_at, a.trace_context
        """

    /// A scope as two parameters: the prefix (when `byPrefix`) or the names.
    struct Scope {
        var byPrefix: Bool
        var prefix: String
        var names: [String]

        init(_ scope: TaskParallelScope) {
            switch scope {
            case .prefix(let prefix): (byPrefix, self.prefix, names) = (true, prefix, [])
            case .queues(let names): (byPrefix, prefix, self.names) = (false, "", names)
            }
        }
    }

    func saveParallelQuery(
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
        )
        INSERT INTO \(unescaped: parallel) AS a (collection, key, queue_name, payload, position, revision, not_before, priority, trace_context)
        SELECT c, k, q, p, n, n, nb, pr, tc FROM input
        ON CONFLICT (collection, key) DO UPDATE SET
            queue_name = excluded.queue_name, payload = excluded.payload, revision = excluded.revision,
            not_before = excluded.not_before, priority = excluded.priority, trace_context = excluded.trace_context, state = 0, attempts = 0,
            last_failure = NULL, failed_at = NULL, owner = NULL, expires_at = '-infinity'
        RETURNING a.collection, a.key, a.position, a.revision
        """
    }

    /// Claims up to `limit` ready actions of the scope: the first rows of `parallel_ready` that no
    /// live claim and no other transaction holds (`SKIP LOCKED`), each with a new token. The rows
    /// are locked by the subquery and updated by their tuple ids (a TID scan, no second index look-up).
    func claimParallelQuery(_ scope: Scope, limit: Int, owner: String, leaseMilliseconds: Int64, now: Double) -> PostgresQuery {
        """
        WITH claimed AS (
        UPDATE \(unescaped: parallel) a
        SET owner = \(owner), token = a.token + 1, expires_at = statement_timestamp() + \(leaseMilliseconds) * interval '1 millisecond'
        WHERE a.ctid = ANY(ARRAY(
            SELECT p.ctid FROM \(unescaped: parallel) p
            WHERE p.state = 0 AND p.expires_at < statement_timestamp() AND (p.not_before IS NULL OR p.not_before <= \(now)::float8)
              AND ((\(scope.byPrefix) AND starts_with(p.queue_name, \(scope.prefix)))
                   OR (NOT \(scope.byPrefix) AND p.queue_name = ANY(\(scope.names)::text[])))
              -- Evaluated once: with no queue paused (the usual case), no row looks its queue up.
              AND (NOT EXISTS (SELECT 1 FROM \(unescaped: queue) WHERE paused)
                   OR NOT EXISTS (SELECT 1 FROM \(unescaped: queue) q WHERE q.name = p.queue_name AND q.paused))
            ORDER BY p.priority DESC, p.position
            LIMIT \(Int64(max(1, limit)))
            FOR UPDATE OF p SKIP LOCKED
        ))
        RETURNING \(unescaped: Self.parallelColumnsOfA), a.token
        ),
        latest AS (
            INSERT INTO \(unescaped: parallelOwner) AS o (owner, expires_at)
            SELECT \(owner), statement_timestamp() + \(leaseMilliseconds) * interval '1 millisecond' WHERE EXISTS (SELECT 1 FROM claimed)
            ON CONFLICT (owner) DO UPDATE SET expires_at = greatest(o.expires_at, excluded.expires_at)
        )
        SELECT * FROM claimed
        """
    }

    /// The kinds of outcome in ``finishParallelQuery(_:owner:)``.
    enum ParallelOutcomeKind {
        static let completed: Int16 = 0
        static let failed: Int16 = 1
        static let deadLettered: Int16 = 2
        static let held: Int16 = 3

        /// An outcome's kind, and its retry time (NaN: none).
        static func of(_ result: TaskParallelOutcome.Result) -> (kind: Int16, retryAt: Double) {
            switch result {
            case .completed: (completed, .nan)
            case .failed(let at): (failed, at?.timeIntervalSince1970 ?? .nan)
            case .deadLettered: (deadLettered, .nan)
            case .held: (held, .nan)
            }
        }
    }

    /// What a failed outcome sets on the row `a`, from the input row `i` (`kind`, `at`, `reason`,
    /// `fa`, as ``ParallelOutcomeKind`` says): the attempt counted, a dead letter or a hold for
    /// `kind` 2 and 3, the retry time for 1, and the last failure.
    static let failedParallelColumns = """
        attempts = least(a.attempts::int8 + 1, 2147483647)::int4,
        state = CASE i.kind WHEN 2 THEN 1 WHEN 3 THEN 2 ELSE 0 END,
        not_before = CASE WHEN i.kind = 1 THEN NULLIF(i.at, 'NaN'::float8) ELSE a.not_before END,
        last_failure = NULLIF(i.reason, ''), failed_at = NULLIF(i.fa, 'NaN'::float8)
        """

    /// Stores outcomes whose claims `owner` still holds (same revision and token); returns the
    /// key and collection of each one stored.
    func finishParallelQuery(_ outcomes: [TaskParallelOutcome], owner: String) -> PostgresQuery {
        let kinds = outcomes.map { ParallelOutcomeKind.of($0.result) }
        let tasks = outcomes.map(\.claim.task)
        return """
            SELECT collection, key FROM \(unescaped: schemaQualified("parallel_finish"))(
                \(owner), \(PostgresArray(tasks.map(\.collection)))::text[], \(PostgresArray(tasks.map(\.key)))::text[],
                \(PostgresArray(tasks.map(\.revision)))::int8[], \(PostgresArray(outcomes.map(\.claim.token)))::int8[],
                \(PostgresArray(kinds.map(\.kind)))::int2[], \(PostgresArray(kinds.map(\.retryAt)))::float8[],
                \(PostgresArray(tasks.map { $0.lastFailure?.reason ?? "" }))::text[],
                \(PostgresArray(tasks.map { $0.lastFailure?.failedAt.timeIntervalSince1970 ?? .nan }))::float8[])
            """
    }

    /// Deletes the completed actions whose claims `owner` still holds (the usual finish: three
    /// arrays, one index look-up each); returns the key and collection of each.
    func completeParallelQuery(_ claims: [TaskParallelClaim], owner: String) -> PostgresQuery {
        let tasks = claims.map(\.task)
        return """
            SELECT collection, key FROM \(unescaped: schemaQualified("parallel_complete"))(
                \(owner), \(PostgresArray(tasks.map(\.collection)))::text[], \(PostgresArray(tasks.map(\.key)))::text[],
                \(PostgresArray(claims.map(\.token)))::int8[])
            """
    }

    /// Extends the claims `owner` still holds; returns the key and collection of each.
    func renewParallelQuery(_ claims: [TaskParallelClaim], owner: String, leaseMilliseconds: Int64) -> PostgresQuery {
        let tasks = claims.map(\.task)
        return """
            SELECT collection, key FROM \(unescaped: schemaQualified("parallel_renew"))(
                \(owner), \(PostgresArray(tasks.map(\.collection)))::text[], \(PostgresArray(tasks.map(\.key)))::text[],
                \(PostgresArray(tasks.map(\.revision)))::int8[], \(PostgresArray(claims.map(\.token)))::int8[], \(leaseMilliseconds))
            """
    }

    /// Drops the claims `owner` still holds; returns the queue of each.
    func releaseParallelQuery(_ claims: [TaskParallelClaim], owner: String) -> PostgresQuery {
        let tasks = claims.map(\.task)
        return """
            SELECT * FROM \(unescaped: schemaQualified("parallel_release"))(
                \(owner), \(PostgresArray(tasks.map(\.collection)))::text[], \(PostgresArray(tasks.map(\.key)))::text[],
                \(PostgresArray(claims.map(\.token)))::int8[])
            """
    }

    /// The earliest future not-before time of the scope, and the seconds until the latest claim of
    /// another owner expires, the earliest of those (the server's clock): a worker that died frees
    /// its actions then. (A live worker renews before: the idle one wakes, finds nothing, and looks again.)
    func nextParallelTimeQuery(_ scope: Scope, owner: String, now: Double) -> PostgresQuery {
        """
        SELECT
            (SELECT min(p.not_before) FROM \(unescaped: parallel) p
             WHERE p.state = 0 AND p.not_before IS NOT NULL AND p.not_before > \(now)::float8
               AND ((\(scope.byPrefix) AND starts_with(p.queue_name, \(scope.prefix)))
                    OR (NOT \(scope.byPrefix) AND p.queue_name = ANY(\(scope.names)::text[])))),
            (SELECT EXTRACT(EPOCH FROM (min(o.expires_at) - clock_timestamp()))::float8 FROM \(unescaped: parallelOwner) o
             WHERE o.owner <> \(owner) AND o.expires_at >= clock_timestamp())
        """
    }

    /// Makes the scope's held actions ready (a broker of the scope started), and forgets the
    /// owners whose claims expired a day ago.
    func releaseHeldParallelQuery(_ scope: Scope) -> PostgresQuery {
        """
        WITH gone AS (DELETE FROM \(unescaped: parallelOwner) WHERE expires_at < clock_timestamp() - interval '1 day')
        UPDATE \(unescaped: parallel) p SET state = 0
        WHERE p.state = 2
          AND ((\(scope.byPrefix) AND starts_with(p.queue_name, \(scope.prefix)))
               OR (NOT \(scope.byPrefix) AND p.queue_name = ANY(\(scope.names)::text[])))
        RETURNING p.queue_name
        """
    }

    func parallelCountsQuery() -> PostgresQuery {
        """
        SELECT queue_name, count(*) FILTER (WHERE state <> 1), count(*) FILTER (WHERE state = 1),
               min(saved_at) FILTER (WHERE state <> 1)
        FROM \(unescaped: parallel) GROUP BY queue_name
        """
    }

    func parallelQueueNamesQuery() -> PostgresQuery {
        "SELECT DISTINCT queue_name FROM \(unescaped: parallel) ORDER BY queue_name"
    }

    func deleteParallelQuery(collection: String, key: String) -> PostgresQuery {
        "DELETE FROM \(unescaped: parallel) WHERE collection = \(collection) AND key = \(key) RETURNING \(unescaped: Self.parallelColumns)"
    }

    func lookupParallelQuery(collection: String, key: String) -> PostgresQuery {
        "SELECT \(unescaped: Self.parallelColumns), state FROM \(unescaped: parallel) WHERE collection = \(collection) AND key = \(key)"
    }

    func parallelDeadLettersQuery(queueName: String?) -> PostgresQuery {
        guard let queueName else {
            return "SELECT \(unescaped: Self.parallelColumns) FROM \(unescaped: parallel) WHERE state = 1 ORDER BY queue_name, position"
        }
        return """
            SELECT \(unescaped: Self.parallelColumns) FROM \(unescaped: parallel)
            WHERE queue_name = \(queueName) AND state = 1 ORDER BY position
            """
    }

    func replayParallelDeadLetterQuery(collection: String, key: String) -> PostgresQuery {
        """
        UPDATE \(unescaped: parallel) SET state = 0, attempts = 0, last_failure = NULL, failed_at = NULL, not_before = NULL,
            owner = NULL, expires_at = '-infinity', revision = nextval('\(unescaped: sequence)')
        WHERE collection = \(collection) AND key = \(key) AND state = 1
        RETURNING \(unescaped: Self.parallelColumns)
        """
    }

    func discardParallelDeadLetterQuery(collection: String, key: String) -> PostgresQuery {
        """
        DELETE FROM \(unescaped: parallel) WHERE collection = \(collection) AND key = \(key) AND state = 1
        RETURNING \(unescaped: Self.parallelColumns)
        """
    }
}
