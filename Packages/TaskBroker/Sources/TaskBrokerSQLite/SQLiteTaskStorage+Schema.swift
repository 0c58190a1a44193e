import GRDB
import QueuePersistence
import TaskBrokerCore

extension SQLiteTaskStorage {
    /// TaskBroker's tables in a shared file: migrations named `taskbroker-…`.
    static var schema: SQLiteSchema {
        SQLiteSchema(owner: "TaskBroker", migrator: migrator, migrationPrefix: "taskbroker-", version: 10)
    }

    /// The schema history. Add migrations; never edit a shipped one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("taskbroker-v1") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_action (
                    collection TEXT NOT NULL,
                    key TEXT NOT NULL,
                    queue_name TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    revision INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    pause_kind INTEGER NOT NULL DEFAULT 0,
                    pause_until REAL,
                    PRIMARY KEY (collection, key)
                );
                CREATE INDEX taskbroker_action_queue ON taskbroker_action(queue_name, position);
                CREATE TABLE taskbroker_sequence (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
                INSERT INTO taskbroker_sequence (id, value) VALUES (1, 0);
                """)
        }
        // The completion log: a succeeded action is logged here (one append per outcome, on the
        // last pages of one small table) instead of deleted from `taskbroker_action` (three
        // B-trees, one page each per queue); `compact(in:)` applies the log in bulk. Every read
        // treats a logged revision as deleted.
        migrator.registerMigration("taskbroker-v2-completion-log") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_done (
                    id INTEGER PRIMARY KEY,
                    revision INTEGER NOT NULL,
                    collection TEXT NOT NULL,
                    key TEXT NOT NULL
                );
                """)
        }
        // The log holds only revisions, as its rowid: a commit writes few, small log pages; a read
        // skips logged revisions through the log's own B-tree (no temporary index of the whole log
        // per statement); a re-save or delete finds a logged revision without a scan. Compaction
        // finds the logged rows through an index on `revision` (appended to at save: revisions
        // only grow).
        migrator.registerMigration("taskbroker-v3-completion-log-by-revision") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_done_by_revision (revision INTEGER PRIMARY KEY);
                INSERT OR IGNORE INTO taskbroker_done_by_revision (revision) SELECT revision FROM taskbroker_done;
                CREATE UNIQUE INDEX taskbroker_action_revision ON taskbroker_action(revision);
                DROP TABLE taskbroker_done;
                ALTER TABLE taskbroker_done_by_revision RENAME TO taskbroker_done;
                """)
        }
        // The change journal: every save, delete, resume and purge appends the queues it changed,
        // with the writing process's token, so that brokers of other processes sharing the file
        // learn of them (``ExternalChangeWatcher``). And the brokers set up on the file, so that
        // overlapping prefix claims of different processes are refused (``SQLiteBrokerLocks``).
        // `seq` is the rowid without AUTOINCREMENT (which writes `sqlite_sequence` on every
        // insert): pruning always keeps the newest entries, so a new entry is always numbered
        // past every entry there ever was.
        migrator.registerMigration("taskbroker-v4-change-journal") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_change (
                    seq INTEGER PRIMARY KEY,
                    queue_name TEXT NOT NULL,
                    origin TEXT NOT NULL
                );
                CREATE TABLE taskbroker_broker (
                    name TEXT PRIMARY KEY,
                    prefix_claim INTEGER NOT NULL
                );
                """)
        }
        // What a job system keeps with each action: the earliest start (`not_before`, seconds since
        // 1970; NULL: at once), a priority, a state (0 ready, 1 dead letter: never read as part of
        // its queue) and the last failed run (`last_failure`, `failed_at`). Existing rows are ready,
        // at once, priority 0, with no failure on record; their attempts and pauses are kept. The
        // index on (not_before, position) holds only the actions saved to run later: a broker finds
        // those whose time has come, and the next time to wake up, through it. The queues an
        // operator paused (`pauseQueues`) are the rows of `taskbroker_paused`.
        migrator.registerMigration("taskbroker-v5-job-schema") { db in
            try db.execute(sql: """
                ALTER TABLE taskbroker_action ADD COLUMN not_before REAL;
                ALTER TABLE taskbroker_action ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE taskbroker_action ADD COLUMN state INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE taskbroker_action ADD COLUMN last_failure TEXT;
                ALTER TABLE taskbroker_action ADD COLUMN failed_at REAL;
                CREATE INDEX taskbroker_action_schedule ON taskbroker_action(not_before, position) WHERE not_before IS NOT NULL;
                CREATE INDEX taskbroker_action_dead_letters ON taskbroker_action(queue_name, position) WHERE state = 1;
                CREATE TABLE taskbroker_paused (queue_name TEXT PRIMARY KEY) WITHOUT ROWID;
                """)
        }
        // Schedules (`TaskScheduler`): one row per schedule, with its last recorded tick (seconds
        // since 1970), when it was recorded, the key of its action, and the next tick and the
        // recurrence as the last scheduler that ran it described them.
        migrator.registerMigration("taskbroker-v6-schedules") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_schedule (
                    name TEXT PRIMARY KEY,
                    recurrence TEXT NOT NULL,
                    last_tick REAL,
                    last_enqueued_at REAL,
                    last_key TEXT,
                    next_tick REAL
                ) WITHOUT ROWID;
                """)
        }
        // Rate limits (`TaskQueueBroker.Configuration.rateLimits`): one row per start recorded in a
        // bucket, at its time (seconds since 1970); rows older than their limit's window are deleted
        // when the bucket is next asked.
        migrator.registerMigration("taskbroker-v7-rate-limits") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_rate_start (bucket TEXT NOT NULL, at REAL NOT NULL);
                CREATE INDEX taskbroker_rate_start_by_bucket ON taskbroker_rate_start(bucket, at);
                """)
        }
        // When each action was saved (seconds since 1970; a replacement keeps it, a save over a
        // completed action starts anew): a queue's oldest pending action, for operators. Existing
        // rows have none (NULL).
        migrator.registerMigration("taskbroker-v8-saved-at") { db in
            try db.execute(sql: "ALTER TABLE taskbroker_action ADD COLUMN saved_at REAL")
        }
        // When each recorded start leaves its limit's window (`expires_at`, seconds since 1970):
        // any request deletes every bucket's expired starts, so that a bucket no broker asks again
        // (a limit per queue, over queue names used once) does not keep its rows for ever.
        migrator.registerMigration("taskbroker-v9-rate-start-expiry") { db in
            try db.execute(sql: """
                ALTER TABLE taskbroker_rate_start ADD COLUMN expires_at REAL;
                CREATE INDEX taskbroker_rate_start_by_expiry ON taskbroker_rate_start(expires_at);
                """)
        }
        // Plain parallel actions (`saveParallel`): kept apart from the queues' ordered actions, each
        // claimed on its own by a broker (`owner`, a `token` that every claim increments, and
        // `expires_at`, seconds since 1970). `state`: 0 ready, 1 dead letter, 2 held until a broker
        // starts (`.waitForRestart`). Brokers take the ready ones by priority, then position,
        // through `taskbroker_parallel_ready`. `taskbroker_parallel_owner` keeps when each owner's
        // claims expire at the latest: an idle broker learns from it when another's come free.
        migrator.registerMigration("taskbroker-v10-parallel-actions") { db in
            try db.execute(sql: """
                CREATE TABLE taskbroker_parallel (
                    collection TEXT NOT NULL,
                    key TEXT NOT NULL,
                    queue_name TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    revision INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    not_before REAL,
                    priority INTEGER NOT NULL DEFAULT 0,
                    state INTEGER NOT NULL DEFAULT 0,
                    last_failure TEXT,
                    failed_at REAL,
                    saved_at REAL,
                    owner TEXT,
                    token INTEGER NOT NULL DEFAULT 0,
                    expires_at REAL NOT NULL DEFAULT 0,
                    PRIMARY KEY (collection, key)
                );
                CREATE INDEX taskbroker_parallel_ready ON taskbroker_parallel(priority DESC, position) WHERE state = 0;
                CREATE INDEX taskbroker_parallel_queue ON taskbroker_parallel(queue_name, state);
                CREATE TABLE taskbroker_parallel_owner (owner TEXT PRIMARY KEY, expires_at REAL NOT NULL) WITHOUT ROWID;
                """)
        }
        // The trace context of each action's save (JSON of the instrument's propagation headers;
        // NULL without one), so that its runs join the save's trace in any process.
        migrator.registerMigration("taskbroker-v11-trace-context") { db in
            try db.execute(sql: """
                ALTER TABLE taskbroker_action ADD COLUMN trace_context TEXT;
                ALTER TABLE taskbroker_parallel ADD COLUMN trace_context TEXT;
                """)
        }
        return migrator
    }
}
