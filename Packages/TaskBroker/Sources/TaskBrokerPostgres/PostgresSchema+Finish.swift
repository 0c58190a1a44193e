import Foundation
import PostgresNIO
import TaskBrokerCore

// The finish statement of the queues' actions: outcomes, next heads and notifications in one round trip.
extension PostgresSchema {
    /// The kinds of entry ``finishQuery(outcomes:epochs:nextHeads:owner:origin:leaseMilliseconds:)``
    /// returns: its one row holds three arrays, `(position of the outcome, 1-based; kind; epoch or
    /// count, -1 for none)`, one entry per element.
    enum FinishRow {
        /// The outcome's queue was held: its lease is released.
        static let held: Int16 = 0
        /// The outcome's queue was held and its lease kept for the next head, under the same epoch.
        static let next: Int16 = 1
        /// The outcome's completed action was deleted.
        static let done: Int16 = 2
        /// The outcome's failure was counted.
        static let failed: Int16 = 3
        /// The number of notifications sent (position 0).
        static let notified: Int16 = 4
    }

    /// Stores outcomes whose queue the owner still holds under the claim's epoch, releases those
    /// leases and sends the change notifications, in one call of the finish function
    /// (``finishFunctionDefinition``: one round trip, committed on its own, planned once per
    /// connection). It returns one row of three arrays (see ``FinishRow``): `held` per outcome whose
    /// lease was held, `done` per deleted action, `failed` per action whose failure was counted, and
    /// one `notified` entry (the number of notifications). One row, not one per entry: a row costs
    /// the server a message and the worker a row to parse, about 900 of them for 450 outcomes.
    ///
    /// Each outcome's action, and each next head, is found by its position (unique: one sequence
    /// numbers every first save, and a save that replaces an action keeps it) and applies only to
    /// its revision (also unique: the same sequence numbers every save, so a replaced or moved
    /// action no longer matches). One text array to send, not five (queue, collection and key of
    /// the action and of the next head), and an index of 8-byte keys to search (the
    /// `(collection, key)` and `(queue_name, position)` indexes compare text: a quarter of the
    /// function's time for 450 outcomes went to searching them).
    ///
    /// The notifications are those of `ChangeMessage.chunks`, built from what the statement
    /// changed: `{"q":[…],"c":[[queue, collection, key, revision], …]}` objects of at most
    /// ~7,914 bytes (PostgreSQL's limit is 8,000), and `{"a":true}` for an entry longer than
    /// `entryLimit` bytes.
    ///
    /// Each notification starts with `origin` (`{"o":"…",`), so that the sender's own change feed
    /// can skip it without decoding it: the sender delivers the same changes in process.
    ///
    /// A completed outcome whose queue has an entry in `nextHeads` keeps its lease instead, if the
    /// next head is still stored as given (revision, attempts, not paused) as the statement's
    /// snapshot shows it: same epoch (the holder does not change), extended to a full lease from
    /// now only if less than eleven twelfths of it was left. Such an outcome's entry is `next`
    /// instead of `held`, with the epoch, and its completion is not announced (the queue stays
    /// held). (A completion that turns out outdated keeps the lease too; the caller does not count
    /// its next head as claimed.)
    ///
    /// The leases are locked (`FOR NO KEY UPDATE`), not updated, unless released or extended: a
    /// busy queue costs one row lock per action, not a new row version (about a quarter of the
    /// statement's time for 450 outcomes, measured with `EXPLAIN ANALYZE`).
    func finishQuery(
        outcomes: [TaskOutcome], epochs: [Int64], nextHeads: [String: StoredTask], owner: String, origin: String,
        leaseMilliseconds: Int64
    ) -> PostgresQuery {
        // A kept lease with less than this left is extended (see `TaskStorage.finish(_:claimingNext:owner:leaseDuration:)`).
        let keepMilliseconds = leaseMilliseconds - leaseMilliseconds / 12
        let count = outcomes.count
        var queueNames: [String] = []
        var positions: [Int64] = []
        var revisions: [Int64] = []
        var kinds: [Int16] = []
        var untils: [Double] = []
        // The next head of each completed queue that has one (-1: none).
        var nextPositions: [Int64] = []
        var nextRevisions: [Int64] = []
        var nextAttempts: [Int32] = []
        // Per failure, why and when ("" and 0 for a completion).
        var reasons: [String] = []
        var failedAts: [Double] = []
        queueNames.reserveCapacity(count)
        positions.reserveCapacity(count)
        revisions.reserveCapacity(count)
        kinds.reserveCapacity(count)
        untils.reserveCapacity(count)
        nextPositions.reserveCapacity(count)
        nextRevisions.reserveCapacity(count)
        nextAttempts.reserveCapacity(count)
        reasons.reserveCapacity(count)
        failedAts.reserveCapacity(count)
        for outcome in outcomes {
            let task: StoredTask
            var next: StoredTask?
            switch outcome {
            case .completed(let completed, _):
                task = completed
                kinds.append(0)
                untils.append(0)
                next = nextHeads[task.queueName]
            case .failed(let failed, nil, _):
                task = failed
                kinds.append(1)
                untils.append(0)
            case .failed(let failed, .until(let date)?, _):
                task = failed
                kinds.append(2)
                untils.append(date.timeIntervalSince1970)
            case .failed(let failed, .untilRestart?, _):
                task = failed
                kinds.append(3)
                untils.append(0)
            case .deadLettered(let failed, _):
                task = failed
                kinds.append(4)
                untils.append(0)
            }
            queueNames.append(task.queueName)
            positions.append(task.position)
            revisions.append(task.revision)
            nextPositions.append(next?.position ?? -1)
            nextRevisions.append(next?.revision ?? -1)
            nextAttempts.append(Int32(clamping: next?.attempts ?? 0))
            reasons.append(task.lastFailure?.reason ?? "")
            failedAts.append(task.lastFailure?.failedAt.timeIntervalSince1970 ?? 0)
        }
        // A batch of completions only (the common case) sends no reasons: `unnest` pads the
        // missing elements with NULL, which the function reads as "no failure".
        if !kinds.contains(where: { $0 > 0 }) {
            reasons = []
            failedAts = []
        }
        return """
        SELECT * FROM \(unescaped: finishFunction)(
            \(PostgresArray(queueNames))::text[], \(PostgresArray(epochs))::int8[], \(PostgresArray(positions))::int8[],
            \(PostgresArray(revisions))::int8[], \(PostgresArray(kinds))::int2[], \(PostgresArray(untils))::float8[],
            \(PostgresArray(nextPositions))::int8[], \(PostgresArray(nextRevisions))::int8[], \(PostgresArray(nextAttempts))::int4[],
            \(PostgresArray(reasons))::text[], \(PostgresArray(failedAts))::float8[],
            \(owner)::text, \(leaseMilliseconds)::int8, \(keepMilliseconds)::int8, \(ChangeMessage.originPrefix(origin))::text,
            \(channel)::text, \(Int64(Self.chunkBytes))::int8, \(Int64(Self.entryLimit))::int8
        )
        """
    }

    /// The finish statement as a function (``finishFunction``), created by the migrations: each
    /// connection plans it once and keeps the plan (PL/pgSQL caches its statements' plans), instead
    /// of parsing and planning a statement of some 80 lines at every finish. Planning it cost the
    /// server about 2 ms of CPU per finish, as much as storing 250 outcomes (measured: the
    /// server's CPU per action against the batch size in the burn-down benchmark).
    ///
    /// Its parameters: per outcome, the queue, the epoch of its lease, the action's position and
    /// revision, the kind (0 completed, 1 failed, 2 failed until `until`, 3 failed until restarted,
    /// 4 failed for the last time: a dead letter)
    /// and `until` (seconds since 1970), the next head's position, revision and attempts (-1:
    /// none), and a failure's reason and time (seconds since 1970; `""` or no element for a
    /// completion); then the owner, the lease and `keep` in milliseconds, the notifications' origin
    /// prefix, channel, chunk size and entry limit. Changing them creates a second function beside
    /// the first (PostgreSQL tells functions apart by their parameter types), which workers of the
    /// previous version go on calling; changing the body needs a new schema version
    /// (``migrate(on:logger:)`` creates the function anew whenever it migrates).
    var finishFunctionDefinition: String {
        """
        CREATE OR REPLACE FUNCTION \(finishFunction)(
            p_queue_names text[], p_epochs int8[], p_positions int8[], p_revisions int8[], p_kinds int2[], p_untils float8[],
            p_next_positions int8[], p_next_revisions int8[], p_next_attempts int4[],
            p_reasons text[], p_failed_ats float8[],
            p_owner text, p_lease_ms int8, p_keep_ms int8, p_origin text, p_channel text, p_chunk_bytes int8, p_entry_limit int8
        ) RETURNS TABLE (r_positions int8[], r_kinds int2[], r_values int8[]) LANGUAGE plpgsql
        -- Every row it touches is found through an index. Without this, the plan of `released` and
        -- `extended` scanned the whole queue table at every finish, also with no lease to release or
        -- extend, while the table was small (ten names guessed against eleven pages: about a thousand
        -- queues). In the burn-down benchmark, that was 2,000 rows per finish, ~10 per outcome.
        SET enable_seqscan = off
        AS $function$
        #variable_conflict use_column
        BEGIN
            RETURN QUERY
            -- Materialized, so that the next head is looked up once per outcome whatever the planner
            -- does with `held`. The look-up is a LATERAL with LIMIT 1, so that it is one probe of the
            -- position index per outcome (an EXISTS may be planned as a hash of the whole action
            -- table). Its queue is compared outside, so that no index on the queue is chosen instead.
            WITH outcome AS MATERIALIZED (
                SELECT o.*, (o.kind = 0 AND o.next_revision >= 0 AND n.queue_name IS NOT NULL AND n.queue_name = o.queue_name) AS go_on
                FROM unnest(p_queue_names, p_epochs, p_positions, p_revisions, p_kinds,
                            p_untils, p_next_positions, p_next_revisions, p_next_attempts, p_reasons, p_failed_ats)
                    WITH ORDINALITY
                    AS o(queue_name, epoch, position, revision, kind, until, next_position, next_revision, next_attempts,
                         reason, failed_at, i)
                LEFT JOIN LATERAL (
                    SELECT n.queue_name FROM \(action) n
                    WHERE n.position = o.next_position
                      AND n.revision = o.next_revision AND n.attempts = o.next_attempts AND n.pause_kind IS NULL AND n.state <> 1
                    LIMIT 1
                ) n ON true
            ),
            held AS (
                -- The leases the owner still holds under the outcomes' epochs, locked until the commit:
                -- a worker that claims one of them now skips it, and a worker that took one over first
                -- changed its owner or epoch. A lock, not an update: a lease kept for the next head
                -- keeps its epoch (its holder does not change) and is extended only when it is short.
                --
                -- In name order, as every statement that waits for a queue's row locks them: two that
                -- locked the same rows in different orders (a finish and the lease renewal) deadlocked.
                -- One primary-key probe per outcome, taken in the sorted outcomes' order: a join let
                -- the cached (generic) plan, with the queue table's statistics from when it was
                -- nearly empty, scan every queue once per outcome (45 ms for 450 outcomes).
                SELECT o.i, q.name, q.epoch, o.go_on AND NOT q.paused AS go_on, o.position, o.revision, o.kind, o.until, o.reason, o.failed_at,
                       q.expires_at < clock_timestamp() + p_keep_ms * interval '1 millisecond' AS short
                FROM (SELECT * FROM outcome ORDER BY queue_name) o
                CROSS JOIN LATERAL (
                    SELECT q.name, q.epoch, q.expires_at, q.paused FROM \(queue) q
                    WHERE q.name = o.queue_name AND q.epoch = o.epoch AND q.owner = p_owner
                    FOR NO KEY UPDATE
                ) q
            ),
            -- The leases released, and those kept for the next head with less than `keep` left,
            -- extended to a full lease: each found through the primary key by an array of names (a
            -- join let the cached plan scan the whole queue table, which keeps a row per queue ever
            -- used). Already locked by `held`: no statement waits here.
            released AS (
                UPDATE \(queue) q SET expires_at = clock_timestamp()
                WHERE q.name = ANY(ARRAY(SELECT name FROM held WHERE NOT go_on))
            ),
            extended AS (
                UPDATE \(queue) q SET expires_at = clock_timestamp() + p_lease_ms * interval '1 millisecond'
                WHERE q.name = ANY(ARRAY(SELECT name FROM held WHERE go_on AND short))
            ),
            done AS (
                DELETE FROM \(action) a USING held o
                WHERE o.kind = 0 AND a.position = o.position AND a.revision = o.revision
                RETURNING o.i, o.go_on, a.queue_name, a.collection, a.key, a.revision
            ),
            failed AS (
                UPDATE \(action) a SET attempts = LEAST(a.attempts, 2147483646) + 1,
                    pause_kind = CASE o.kind WHEN 2 THEN 1 WHEN 3 THEN 2 END,
                    pause_until = CASE WHEN o.kind = 2 THEN o.until END,
                    last_failure = NULLIF(o.reason, ''), failed_at = CASE WHEN o.reason <> '' THEN o.failed_at END,
                    state = CASE WHEN o.kind = 4 THEN 1 ELSE a.state END
                FROM held o
                WHERE o.kind > 0 AND a.position = o.position AND a.revision = o.revision
                RETURNING o.i, a.queue_name
            ),
            entry AS (
                -- A completion whose queue stays held (`go_on`) is not announced: no other worker can
                -- run that queue before this one lets it go, and one that holds it in memory finds the
                -- completion when it next claims the queue (its head is gone: it reads the queue again).
                SELECT 'c' AS k, json_build_array(queue_name, collection, key, revision::text)::text AS e FROM done WHERE NOT go_on
                UNION ALL SELECT DISTINCT 'q', to_json(queue_name)::text FROM failed
            ),
            sized AS (
                SELECT k, e, (sum(octet_length(e) + 1) OVER (ORDER BY k, e ROWS UNBOUNDED PRECEDING) / p_chunk_bytes) AS chunk
                FROM entry WHERE octet_length(e) <= p_entry_limit
            ),
            payload AS (
                SELECT p_origin || concat_ws(',',
                    '"q":[' || string_agg(e, ',') FILTER (WHERE k = 'q') || ']',
                    '"c":[' || string_agg(e, ',') FILTER (WHERE k = 'c') || ']') || '}' AS text
                FROM sized GROUP BY chunk
                UNION ALL SELECT p_origin || '"a":true}'
                WHERE EXISTS (SELECT 1 FROM entry WHERE octet_length(e) > p_entry_limit)
            ),
            notified AS (
                SELECT pg_notify(p_channel, text) FROM payload
            ),
            -- Each entry names its outcome by position (1-based), not by queue: no text to send and decode.
            result (i, kind, value) AS (
                SELECT i, CASE WHEN go_on THEN \(String(FinishRow.next)) ELSE \(String(FinishRow.held)) END::int2,
                       CASE WHEN go_on THEN epoch ELSE -1 END FROM held
                UNION ALL SELECT i, \(String(FinishRow.done))::int2, -1::int8 FROM done
                UNION ALL SELECT i, \(String(FinishRow.failed))::int2, -1 FROM failed
                -- Read, so that it runs: a CTE that nothing reads and that changes no table is skipped.
                UNION ALL SELECT 0, \(String(FinishRow.notified))::int2, count(*) FROM notified
            )
            SELECT array_agg(i), array_agg(kind), array_agg(value) FROM result;
        END
        $function$
        """
    }

    /// A notification's entries start a new one after this many bytes. A notification holds at
    /// most `chunkBytes + entryLimit` bytes of entries plus ~14 of JSON around them and the
    /// origin's ~30: under PostgreSQL's 8,000.
    static let chunkBytes = 4_900
    /// An entry longer than this becomes `{"a":true}` (PostgreSQL's B-tree indexes refuse keys and
    /// queue names over ~2,700 bytes, so only both long at once come near it).
    static let entryLimit = 3_000
}
