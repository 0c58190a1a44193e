import Foundation
import Logging
import NIOCore
import PostgresNIO
import TaskBroker

/// TaskBroker's tables in one PostgreSQL schema, their migrations and every statement the backend
/// runs.
///
/// - `action`: one row per stored action, keyed by collection and key; `position` orders a queue,
///   `revision` changes with every save (both from one sequence); `pause_kind` is `NULL` (runs),
///   1 (until `pause_until`, seconds since 1970) or 2 (until restarted); `not_before` is the
///   earliest start (seconds since 1970; `NULL`: at once); `state` is 0 (ready) or 1 (a dead
///   letter, never read as part of its queue; statements say `state <> 1` for ready: an equality
///   on a column without statistics yet made the planner read whole queues through a bitmap scan
///   instead of their first actions through the index); `last_failure` and `failed_at` record the last
///   failed run.
/// - `queue`: one row per queue ever saved, with its lease: `owner`, `epoch` (the fencing token,
///   +1 with every claim) and `expires_at` (server time; in the past when released), and whether
///   an operator paused it (`paused`).
/// - `broker`: the brokers running on the schema, one row per name and storage (`owner`), kept
///   alive by their storage (every heartbeat interval) until `expires_at`: brokers of other processes whose
///   names are prefixes of each other are refused (``PostgresTaskStorage/registerBroker(name:claimsPrefix:)``).
/// - `schedule`: one row per schedule of a `TaskScheduler`: its last recorded tick (seconds since
///   1970), when it was recorded (server time), the key of its action, and the next tick and the
///   recurrence as the last scheduler that ran it described them.
/// - `rate_start`: one row per start recorded in a rate limit's bucket, at its time (the server's
///   clock, seconds since 1970) and when it leaves the limit's window (`expires_at`); any request
///   for starts deletes the rows that left their windows, of every bucket.
/// - `parallel_action`: plain parallel actions (`saveParallel`), kept apart from the queues' ordered
///   actions and claimed one row at a time: `owner`, a `token` every claim increments, and
///   `expires_at` (server time). `state`: 0 ready, 1 dead letter, 2 held until a broker starts.
/// - `meta`: the schema version.
struct PostgresSchema: Sendable {
    /// The schema version this code writes; a database with a newer one is refused.
    static let version: Int64 = 11

    let schema: String
    let action: String
    let queue: String
    let meta: String
    let broker: String
    let schedule: String
    let rateStart: String
    /// Plain parallel actions (``PostgresSchema/parallelTableDefinition``).
    let parallel: String
    let sequence: String
    /// The function that stores outcomes (``finishFunctionDefinition``).
    let finishFunction: String
    /// The NOTIFY channel of this schema's brokers.
    let channel: String

    init(schema: String) {
        self.schema = schema
        action = "\"\(schema)\".action"
        queue = "\"\(schema)\".queue"
        meta = "\"\(schema)\".meta"
        broker = "\"\(schema)\".broker"
        schedule = "\"\(schema)\".schedule"
        rateStart = "\"\(schema)\".rate_start"
        parallel = "\"\(schema)\".parallel_action"
        sequence = "\"\(schema)\".revision_seq"
        finishFunction = "\"\(schema)\".finish"
        channel = "taskbroker_\(schema)"
    }

    // MARK: - Migrations

    /// The statements that bring a schema from version N-1 to N, by N.
    private var migrations: [Int64: [String]] {
        [
            1: [
                "CREATE SEQUENCE \(sequence)",
                """
                CREATE TABLE \(action) (
                    collection text NOT NULL,
                    key text NOT NULL,
                    queue_name text NOT NULL,
                    payload bytea NOT NULL,
                    position bigint NOT NULL,
                    revision bigint NOT NULL,
                    attempts integer NOT NULL DEFAULT 0,
                    pause_kind smallint,
                    pause_until double precision,
                    PRIMARY KEY (collection, key)
                )
                """,
                "CREATE INDEX ON \(action) (queue_name, position)",
                """
                CREATE TABLE \(queue) (
                    name text PRIMARY KEY,
                    owner text,
                    epoch bigint NOT NULL DEFAULT 0,
                    expires_at timestamptz NOT NULL DEFAULT '-infinity'
                )
                """,
            ],
            // Version 2: the finish function (every migration creates it anew), which finds actions
            // by position.
            2: ["CREATE UNIQUE INDEX ON \(action) (position)"],
            // Version 3: the finish function plans no sequential scan (its lease updates scanned a
            // queue table of up to about a thousand rows at every finish), and a failure count at
            // its largest stays there instead of failing the finish ("integer out of range").
            3: [],
            // Version 4: the brokers running on the schema (the finish function is unchanged, so
            // workers of version 3 go on working beside it during a rolling upgrade).
            4: [
                """
                CREATE TABLE IF NOT EXISTS \(broker) (
                    name text NOT NULL,
                    owner text NOT NULL,
                    prefix boolean NOT NULL,
                    expires_at timestamptz NOT NULL,
                    PRIMARY KEY (name, owner)
                )
                """,
            ],
            // Version 5: what a job system keeps with each action (see `action` above). Existing rows
            // are ready, at once, priority 0, with no failure on record. The finish function takes
            // the failures' reasons and times: a new signature, created beside version 4's, which
            // workers of version 4 go on calling during a rolling upgrade.
            5: [
                """
                ALTER TABLE \(action)
                    ADD COLUMN IF NOT EXISTS not_before double precision,
                    ADD COLUMN IF NOT EXISTS priority bigint NOT NULL DEFAULT 0,
                    ADD COLUMN IF NOT EXISTS state smallint NOT NULL DEFAULT 0,
                    ADD COLUMN IF NOT EXISTS last_failure text,
                    ADD COLUMN IF NOT EXISTS failed_at double precision
                """,
                // The actions saved to run later, by time: a broker finds those whose time has come,
                // and the next time to wake up, through it.
                "CREATE INDEX IF NOT EXISTS action_schedule ON \(action) (not_before, position) WHERE not_before IS NOT NULL",
                // The dead letters by queue (few: listed and counted without reading the ready actions).
                "CREATE INDEX IF NOT EXISTS action_dead_letters ON \(action) (queue_name, position) WHERE state = 1",
                // Queues an operator paused (`pauseQueues`): no claim takes them, no finish claims their next head.
                "ALTER TABLE \(queue) ADD COLUMN IF NOT EXISTS paused boolean NOT NULL DEFAULT false",
            ],
            // Version 9: when each recorded start leaves its limit's window (`expires_at`): any
            // request deletes every bucket's expired starts (see `rate_start` above).
            9: [
                "ALTER TABLE \(rateStart) ADD COLUMN IF NOT EXISTS expires_at double precision",
                "CREATE INDEX IF NOT EXISTS rate_start_by_expiry ON \(rateStart) (expires_at)",
            ],
            // Version 8: when each action was saved (`saved_at`, the server's clock, seconds since
            // 1970; NULL for rows saved before): a queue's oldest pending action, for operators. A
            // replacement keeps it (an update); a save after completion inserts anew.
            8: [
                "ALTER TABLE \(action) ADD COLUMN IF NOT EXISTS saved_at double precision",
                "ALTER TABLE \(action) ALTER COLUMN saved_at SET DEFAULT extract(epoch FROM now())",
            ],
            // Version 10: plain parallel actions (see `PostgresSchema+Parallel.swift`).
            10: parallelTableDefinition,
            // Version 11: the trace context of each action's save (JSON of the instrument's
            // propagation headers; NULL without one), so that its runs join the save's trace.
            11: [
                "ALTER TABLE \(action) ADD COLUMN IF NOT EXISTS trace_context text",
                "ALTER TABLE \(parallel) ADD COLUMN IF NOT EXISTS trace_context text",
            ],
            // Version 7: rate limits (see `rate_start` above).
            7: [
                "CREATE TABLE IF NOT EXISTS \(rateStart) (bucket text NOT NULL, at double precision NOT NULL)",
                "CREATE INDEX IF NOT EXISTS rate_start_by_bucket ON \(rateStart) (bucket, at)",
            ],
            // Version 6: schedules (`TaskScheduler`), one row per schedule (see `schedule` above).
            6: [
                """
                CREATE TABLE IF NOT EXISTS \(schedule) (
                    name text PRIMARY KEY,
                    recurrence text NOT NULL,
                    last_tick double precision,
                    last_enqueued_at double precision,
                    last_key text,
                    next_tick double precision
                )
                """,
            ],
        ]
    }

    /// Brings the schema up to date. Workers that start at once on an empty database take an
    /// advisory lock in turn: the first migrates, the others find it done. A schema already at
    /// this version is only read: a worker's role needs no CREATE privilege once an owner's role
    /// has migrated it.
    ///
    /// - Throws: `incompatibleSchema` when a newer TaskBroker wrote the database.
    func migrate(on connection: PostgresConnection, logger: Logger, readOnly: Bool = false) async throws {
        // Outside the transaction: a role that may not read the table (or a race with a first
        // migration) goes on to the path below, which says what to check.
        let installed = try? await installedVersion(on: connection, logger: logger)
        if let installed {
            guard installed <= Self.version else { throw newerSchema(installed) }
            if installed == Self.version { return }
        }
        if readOnly {
            throw TaskBrokerError(
                code: .incompatibleSchema,
                message: (installed.map { "Schema \"\(schema)\" was written by an older TaskBroker (schema version \($0); this one needs \(Self.version)), " }
                    ?? "Schema \"\(schema)\" has no TaskBroker tables, ")
                    + "and opened read-only it cannot be migrated; open it read-write once (any worker does), then again."
            )
        }
        do {
            try await PostgresTaskStorage.inTransaction(connection, logger: logger) { connection in
                try await connection.execute("SELECT pg_advisory_xact_lock(hashtext(\("queuekit.taskbroker." + schema)))", logger: logger)
                try await connection.execute(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \"\(schema)\""), logger: logger)
                try await connection.execute(
                    PostgresQuery(unsafeSQL: "CREATE TABLE IF NOT EXISTS \(meta) (name text PRIMARY KEY, value bigint NOT NULL)"),
                    logger: logger
                )
                let current = try await installedVersion(on: connection, logger: logger) ?? 0
                guard current <= Self.version else { throw newerSchema(current) }
                guard current < Self.version else { return }
                for version in (current + 1)...Self.version {
                    for statement in migrations[version] ?? [] {
                        try await connection.execute(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                }
                // The functions as this version defines them (a new version may change their bodies).
                try await connection.execute(PostgresQuery(unsafeSQL: finishFunctionDefinition), logger: logger)
                try await connection.execute(
                    """
                    INSERT INTO \(unescaped: meta) (name, value) VALUES ('schema_version', \(Self.version))
                    ON CONFLICT (name) DO UPDATE SET value = excluded.value
                    """,
                    logger: logger
                )
                logger.info("schema \(schema) migrated from version \(current) to \(Self.version)")
            }
        } catch let error as TaskBrokerError {
            throw error
        } catch {
            throw TaskBrokerError(
                code: .storageFailed,
                message: "Could not create or migrate TaskBroker's tables in schema \"\(schema)\"; check that the user may create schemas and tables in this database (a role that may not: start one worker with a role that may, once, or after an upgrade; then this role needs USAGE on the schema, SELECT, INSERT, UPDATE and DELETE on its tables and USAGE on its sequence).",
                underlying: error
            )
        }
    }

    /// The schema version stored in the schema's `meta` table; `nil` when there is no such table or row.
    private func installedVersion(on connection: PostgresConnection, logger: Logger) async throws -> Int64? {
        var exists = false
        for try await value in try await connection.query("SELECT to_regclass(\(meta)) IS NOT NULL", logger: logger).decode(Bool.self) {
            exists = value
        }
        guard exists else { return nil }
        var version: Int64?
        for try await value in try await connection.query(
            PostgresQuery(unsafeSQL: "SELECT value FROM \(meta) WHERE name = 'schema_version'"), logger: logger
        ).decode(Int64.self) {
            version = value
        }
        return version
    }

    private func newerSchema(_ version: Int64) -> TaskBrokerError {
        TaskBrokerError(
            code: .incompatibleSchema,
            message: "Schema \"\(schema)\" was written by a newer TaskBroker (schema version \(version); this one knows up to \(Self.version)). Upgrade this worker, or use another schema."
        )
    }

    // MARK: - Rows

    static let taskColumns = """
        collection, key, queue_name, payload, position, revision, attempts, pause_kind, pause_until, \
        not_before, priority, last_failure, failed_at, trace_context
        """

    /// A stored action from a row of ``taskColumns``.
    static func task(_ row: PostgresRow) throws -> StoredTask {
        var cells = RowReader(row)
        let collection: String = try cells.next()
        let key: String = try cells.next()
        return StoredTask(
            key: key, collection: collection, queueName: try cells.next(), payload: try cells.next(),
            position: try cells.next(), revision: try cells.next(), attempts: Int(try cells.next(Int32.self)),
            pause: pause(kind: try cells.next(), until: try cells.next()),
            notBefore: (try cells.next(Double?.self)).map(Date.init(timeIntervalSince1970:)),
            priority: Int(try cells.next(Int64.self)),
            lastFailure: failure(reason: try cells.next(), at: try cells.next()),
            traceContext: TaskTraceHeaders.decoded(try cells.next(String?.self))
        )
    }

    static func failure(reason: String?, at seconds: Double?) -> TaskFailure? {
        reason.map { TaskFailure(reason: $0, failedAt: Date(timeIntervalSince1970: seconds ?? 0)) }
    }

    static func pause(kind: Int16?, until: Double?) -> TaskPause? {
        switch kind {
        case 1: .until(Date(timeIntervalSince1970: until ?? 0))
        case 2: .untilRestart
        default: nil
        }
    }

    // MARK: - Statements

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
            case .completed(let completed):
                task = completed
                kinds.append(0)
                untils.append(0)
                next = nextHeads[task.queueName]
            case .failed(let failed, nil):
                task = failed
                kinds.append(1)
                untils.append(0)
            case .failed(let failed, .until(let date)?):
                task = failed
                kinds.append(2)
                untils.append(date.timeIntervalSince1970)
            case .failed(let failed, .untilRestart?):
                task = failed
                kinds.append(3)
                untils.append(0)
            case .deadLettered(let failed):
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

/// Reads a row's cells in column order. Cheaper than `PostgresRow.decode` with a tuple type, which
/// looks the tuple's metadata up again for every row: that look-up cost more than the decoding
/// itself, about a tenth of a burn-down worker's CPU (most of it reading the stored actions).
struct RowReader {
    private var cells: PostgresRow.Iterator

    init(_ row: PostgresRow) {
        cells = row.makeIterator()
    }

    mutating func next<Value: PostgresDecodable>(_: Value.Type = Value.self) throws -> Value {
        guard let cell = cells.next() else {
            throw TaskBrokerError(code: .storageFailed, message: "A row from PostgreSQL has fewer columns than TaskBroker's statement selects.")
        }
        return try cell.decode(Value.self)
    }
}
