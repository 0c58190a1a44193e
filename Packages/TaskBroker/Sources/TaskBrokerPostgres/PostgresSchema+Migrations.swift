import Foundation
import Logging
import PostgresNIO
import TaskBrokerCore

// The migrations that bring a schema to this version, run once however many workers start at once.
extension PostgresSchema {
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
}
