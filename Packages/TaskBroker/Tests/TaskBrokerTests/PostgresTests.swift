// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import AsyncPrimitivesTesting
import Foundation
import Logging
import PostgresNIO
import Synchronization
import TaskBroker
@testable import TaskBrokerPostgres
import Testing

/// What only the PostgreSQL backend does: workers of one pool, the caller's transaction, typed
/// connection errors, the schema's version, and a server that restarts under a running broker.
@Suite(.timeLimit(.minutes(3)))
struct PostgresTests {
    @Test func enqueueingInsideTheCallersTransactionCommitsTogetherOrNotAtAll() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let table = "\"\(store.schema)\".message"
        try await database.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (id text PRIMARY KEY, body text)"))
        }
        struct Rollback: Error {}
        await #expect(throws: Rollback.self) {
            try await database.write { tx in
                try await tx.execute(PostgresQuery(unsafeSQL: "INSERT INTO \(table) (id, body) VALUES ('m1', 'lost')"))
                try await tx.save(TestAction(key: "lost", queueName: "h-q"))
                throw Rollback()
            }
        }
        #expect(try await database.snapshot().isEmpty, "the rolled-back action is not stored")
        let count = try await database.write { tx -> Int in
            try await tx.execute(PostgresQuery(unsafeSQL: "INSERT INTO \(table) (id, body) VALUES ('m2', 'hello')"))
            try await tx.save(TestAction(key: "m2", queueName: "h-q"))
            var count = 0
            for try await value in try await tx.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM \(table)")).decode(Int.self) {
                count = value
            }
            return count
        }
        #expect(count == 1, "neither row of the rolled-back transaction exists")
        #expect(await handler.handled.values(count: 1) == ["m2"])
        await broker.shutdown()
        #expect(handler.handled.values == ["m2"])
    }

    /// A statement of the caller's transaction fails and the caller catches its error: PostgreSQL
    /// then rolls the whole transaction back at its COMMIT, without an error. `write` throws
    /// instead of returning as if the action were stored.
    @Test func aTransactionRolledBackByAFailedStatementWhoseErrorWasCaughtThrows() async throws {
        let database = try await TestStore(.postgres).open()
        let error = await #expect(throws: TaskBrokerError.self) {
            try await database.write { tx in
                try await tx.save(TestAction(key: "lost", queueName: "h-q"))
                _ = try? await tx.execute(PostgresQuery(unsafeSQL: "SELECT 1 / 0"))
            }
        }
        #expect(error?.code == .storageFailed)
        #expect(error?.message.contains("rolled the transaction back") == true, "\(String(describing: error))")
        #expect(try await database.snapshot().isEmpty, "nothing of it is stored")
        // A statement whose failure was undone by rolling back to a savepoint leaves the rest.
        try await database.write { tx in
            try await tx.save(TestAction(key: "kept", queueName: "h-q"))
            try await tx.execute(PostgresQuery(unsafeSQL: "SAVEPOINT risky"))
            if (try? await tx.execute(PostgresQuery(unsafeSQL: "SELECT 1 / 0"))) == nil {
                try await tx.execute(PostgresQuery(unsafeSQL: "ROLLBACK TO SAVEPOINT risky"))
            }
        }
        #expect(try await database.storage.tasks(inQueue: "h-q").map(\.key) == ["kept"])
    }

    /// A failure count at its largest (a hand edit) does not make the finish fail with "integer
    /// out of range" (retried forever, holding back every outcome stored with it): it stays there.
    @Test func aFailureOfAnActionWhoseAttemptCountIsAtItsLargestIsStored() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let storage = database.storage
        _ = try await storage.save([NewTask(key: "a", collection: "c", queueName: "q", payload: Data())])
        try await database.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "UPDATE \"\(store.schema)\".action SET attempts = 2147483647"))
        }
        let head = try await storage.tasks(inQueue: "q")
        #expect(head.map(\.attempts) == [2_147_483_647])
        let epochs = try await storage.claimGranted(head, owner: "w")
        #expect(try await storage.finish([.failed(head[0], pause: nil, epoch: epochs[0])], owner: "w") == TaskFinishReport())
        #expect(try await storage.tasks(inQueue: "q").map(\.attempts) == [2_147_483_647])
    }

    @Test func manyActionsSavedInOneCallOfTheCallersTransactionRunInOrderAndAKeySavedTwiceIsReplacedInPlace() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        try await database.write { tx in
            try await tx.save((1...5).map { TestAction(key: "a\($0)", queueName: "h-q") } + [TestAction(key: "a2", queueName: "h-q")])
        }
        let stored = try await database.storage.tasks(inQueue: "h-q")
        // a2 saved again is replaced where it stands, as two saves in a row would do.
        #expect(stored.map(\.key) == ["a1", "a2", "a3", "a4", "a5"])
        #expect(stored[1].revision > stored[4].revision, "the second save of a2 came last")
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        #expect(await handler.handled.values(count: 5) == ["a1", "a2", "a3", "a4", "a5"])
        await broker.shutdown()
    }

    @Test func twoWorkersOfOnePoolShareTheQueuesAndRunEachQueueOneAtATimeInOrder() async throws {
        let store = try TestStore(.postgres)
        let probe = ConcurrencyProbe()
        // Each worker's handlers wait until the other worker has started an action too: with its
        // 4 slots busy, the worker that claims first can hold only the 4 queues it runs, and the
        // other claims among the remaining 6. Without the wait, a worker that ran ahead kept the
        // lease of every queue it had run for its next head, and the other waited for leases
        // until the pool was done (the README's "Several processes": a worker gets a queue only
        // once its holder lets it go). It failed so on a loaded machine, either worker running all.
        let started = [EventCollector<Bool>(), EventCollector<Bool>()]
        let workers = try await (0..<2).asyncMap { index in
            let database = try await store.open()
            let handler = RecordingHandler<TestAction> { action in
                started[index].record(true)
                _ = await started[1 - index].values(count: 1)
                await probe.run(action)
            }
            let broker = try await TaskQueueBroker.setup(
                database: database, name: "pool", handler: handler, configuration: .init(maxConcurrentQueues: 4)
            )
            return (database, handler, broker)
        }
        let database = workers[0].0
        let keys = (0..<10).flatMap { queue in (0..<15).map { "q\(queue)-\($0)" } }
        try await database.save(keys.map { TestAction(key: $0, queueName: "pool-\($0.split(separator: "-")[0])") })
        _ = await probe.finished.values(count: keys.count)
        for (_, _, broker) in workers {
            await broker.shutdown()
        }
        let handled = workers[0].1.handled.values + workers[1].1.handled.values
        #expect(handled.sorted() == keys.sorted(), "every action ran once")
        #expect(probe.overlaps == 0, "no two actions of one queue ever ran at once")
        for queue in 0..<10 {
            #expect(probe.order(of: "q\(queue)") == (0..<15).map { "q\(queue)-\($0)" }, "queue q\(queue) ran in order")
        }
        #expect(!workers[0].1.handled.values.isEmpty && !workers[1].1.handled.values.isEmpty, "both workers took part")
        #expect(try await database.snapshot().isEmpty)
    }

    @Test func aQueueAWorkerStopsHoldingIsTakenOverAfterTheLeaseAndItsActionRunsAgain() async throws {
        let store = try TestStore(.postgres)
        let first = try await store.open(leaseDuration: .milliseconds(800))
        let stuck = GateHandler()
        let brokerA = try await TaskQueueBroker.setup(
            database: first, name: "pool", handler: stuck, configuration: .init(shutdownTimeout: .zero)
        )
        try await first.save(TestAction(key: "a", queueName: "pool-q"))
        #expect(await stuck.started.values(count: 1) == ["a"])
        // A gives up on its handler without storing an outcome (as a worker that dies): its lease
        // stays until it expires.
        await brokerA.shutdown()
        let second = try await store.open(leaseDuration: .milliseconds(800))
        let handler = RecordingHandler<TestAction>()
        // Started once the recorder listens: the lease may have expired already, and B start "a" at once.
        let brokerB = try await TaskQueueBroker.setup(
            database: second, name: "pool", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let recorder = EventRecorder(brokerB)
        brokerB.start()
        #expect(await handler.handled.values(count: 1) == ["a"], "B runs the action again")
        let events = await recorder.wait { $0.isSuccess("a") }
        #expect(events.first == .started(queueName: "pool-q", key: "a", collection: "actions", attempt: 1))
        await brokerB.shutdown()
        #expect(try await second.snapshot().isEmpty)
    }

    /// A broker told to stop while its claim is under way (a claim, or a read that takes the
    /// queue's lease) is granted leases it will not use. It lets them go before `shutdown()`
    /// returns: another worker runs the queue at once instead of waiting for the lease (here a
    /// minute) to expire.
    @Test func aBrokerStoppingWhileItsClaimRunsReleasesTheLeasesItWasGranted() async throws {
        let store = try TestStore(.postgres)
        let first = try await store.open(leaseDuration: .seconds(60))
        try await first.save(TestAction(key: "a", queueName: "pool-q"))
        // Another pool's transaction locks the lease table: A's claim waits on it.
        let locker = try await store.open()
        let lockHeld = EventCollector<Bool>()
        let (unlock, unlocking) = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await locker.write { tx in
                try await tx.execute(PostgresQuery(unsafeSQL: "LOCK TABLE \"\(store.schema)\".queue IN EXCLUSIVE MODE"))
                lockHeld.record(true)
                for await _ in unlock { break }
            }
        }
        _ = await lockHeld.values(count: 1)
        let clock = ObservedClock()
        let handlerA = GateHandler()
        let brokerA = try await TaskQueueBroker.setup(
            database: first, name: "pool", handler: handlerA, configuration: .init(shutdownTimeout: .seconds(30)), clock: clock
        )
        // Until the server shows A's claim waiting for the lock (each look is a round trip).
        var waiting = false
        for _ in 0..<10_000 where !waiting {
            waiting = try await locker.write { tx -> Bool in
                let sql = """
                    SELECT count(*)::int8 FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE OF _, a SKIP LOCKED%'
                    """
                var count = 0
                for try await value in try await tx.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) {
                    count = value
                }
                return count > 0
            }
        }
        try #require(waiting, "A's claim waits for the lock")
        // A is told to stop (its shutdown timeout starts on the clock), then its claim goes through.
        let stopping = Task { await brokerA.shutdown() }
        let shutdownDeadline = ManualClock.Instant(offset: .seconds(30))
        #expect(await clock.sleepers(where: { $0[shutdownDeadline] != nil }))
        unlocking.yield()
        try await holder.valueOrCancel
        await stopping.valueOrCancel
        #expect(handlerA.started.count == 0, "a stopping broker starts nothing")
        let lease = try await locker.write { tx -> [Bool] in
            var free: [Bool] = []
            let sql = "SELECT expires_at <= clock_timestamp() FROM \"\(store.schema)\".queue WHERE name = 'pool-q'"
            for try await value in try await tx.query(PostgresQuery(unsafeSQL: sql)).decode(Bool.self) {
                free.append(value)
            }
            return free
        }
        #expect(lease == [true], "the lease A was granted as it stopped is released")
        let second = try await store.open(leaseDuration: .seconds(60))
        let handler = RecordingHandler<TestAction>()
        let brokerB = try await TaskQueueBroker.setup(database: second, name: "pool", handler: handler)
        #expect(await handler.handled.values(count: 1) == ["a"], "B runs the action without waiting for a lease")
        await brokerB.shutdown()
        #expect(try await second.snapshot().isEmpty)
    }

    /// A storage's own change feed hears its finishes in process and skips their notifications
    /// unread; the notifications, built in SQL, are for every other storage. This is what another
    /// `TaskDatabase` (another process) hears of one finish of 300 outcomes (~60 KB of changes,
    /// over PostgreSQL's 8,000 bytes per notification), and of an entry too long to notify.
    @Test func anotherDatabaseHearsEveryCompletionAndFailureOfALargeFinish() async throws {
        let store = try TestStore(.postgres)
        let worker = try await store.open().storage
        let listener = try await store.open().storage
        guard let ownFeed = try await worker.changes(), let feed = try await listener.changes() else {
            Issue.record("the PostgreSQL backend has a change feed")
            return
        }
        var own = ownFeed.makeAsyncIterator()
        var other = feed.makeAsyncIterator()
        let long = String(repeating: "k", count: 200)
        let saved = try await worker.save((0..<300).map { NewTask(key: "\(long)-\($0)", collection: "c", queueName: "q\($0)", payload: Data()) })
        let rest = try await worker.save([NewTask(key: "untouched", collection: "c", queueName: "rest", payload: Data())])
        // Both feeds hear the saves (one notification, read by both).
        #expect(await own.next() == [.queuesChanged(saved.map(\.queueName).sorted())])
        #expect(await other.next() == [.queuesChanged(saved.map(\.queueName).sorted())])
        _ = await own.next()
        _ = await other.next()

        let epochs = try await worker.claimGranted(saved, owner: "w")
        let outcomes = saved.enumerated().map { index, task -> TaskOutcome in
            index < 200 ? .completed(task, epoch: epochs[index]) : .failed(task, pause: nil, epoch: epochs[index])
        }
        #expect(try await worker.finish(outcomes, owner: "w") == TaskFinishReport())
        let expectedCompleted = Set(saved[..<200].map { "\($0.queueName)/\($0.key)@\($0.revision)" })
        let expectedFailed = Set(saved[200...].map(\.queueName))
        var notifications = 0
        var completed: Set<String> = []
        var failed: Set<String> = []
        while completed.count < 200 || failed.count < 100, let changes = await other.next() {
            notifications += 1
            for change in changes {
                switch change {
                case .completed(let tasks): completed.formUnion(tasks.map { "\($0.queueName)/\($0.key)@\($0.revision)" })
                case .queuesChanged(let names):
                    #expect(!names.contains("rest"), "no notification was too long (a catch-up read every queue)")
                    failed.formUnion(names)
                case .spareCapacity(let pool, _):
                    Issue.record("no worker asked for queues: \(pool)")
                case .queuesResumed(let names):
                    Issue.record("no queue was restarted: \(names)")
                case .parallelReady(let names):
                    Issue.record("no parallel action was saved: \(names)")
                }
            }
        }
        #expect(completed == expectedCompleted)
        #expect(failed == expectedFailed)
        #expect(notifications > 1, "the changes did not fit one notification: \(notifications)")
        // The worker's own feed: the same changes, in one delivery, from the finish itself.
        let mine = await own.next() ?? []
        #expect(mine.first == .queuesChanged(expectedFailed.sorted()))
        #expect(mine.count == 2)
        if case .completed(let tasks)? = mine.last {
            #expect(Set(tasks.map { "\($0.queueName)/\($0.key)@\($0.revision)" }) == expectedCompleted)
        } else {
            Issue.record("the worker's own feed hears the completions: \(mine)")
        }

        // An entry too long for any notification: the other database reads every queue; the
        // worker's own feed still hears the completion itself.
        let tooLong = try await worker.save([NewTask(
            key: String(repeating: "x", count: 2_000), collection: "c", queueName: "huge-" + String(repeating: "h", count: 1_500), payload: Data()
        )])
        _ = await own.next()
        _ = await other.next()
        let tooLongEpochs = try await worker.claimGranted(tooLong, owner: "w")
        #expect(try await worker.finish([.completed(tooLong[0], epoch: tooLongEpochs[0])], owner: "w") == TaskFinishReport())
        let caughtUp = await other.next() ?? []
        #expect(caughtUp == [.queuesChanged((expectedFailed.sorted() + ["rest"]).sorted())], "the other database reads every stored queue: \(caughtUp)")
        let heard = await own.next() ?? []
        #expect(heard == [.completed([StoredTask(
            key: tooLong[0].key, collection: "c", queueName: tooLong[0].queueName, payload: Data(), position: 0, revision: tooLong[0].revision
        )])])
        #expect(rest.count == 1)
    }

    /// JSON escapes a control character as `\u00XX`: six bytes for one. The notification of a
    /// save was sized as if escaping at most doubled a name, so a queue named with 1,500 of them
    /// (and two of 700, which together passed for one notification) made payloads over
    /// PostgreSQL's 8,000 bytes: the server refused the NOTIFY, and with it the save.
    @Test func queuesNamedWithControlCharactersAreSavedAndAnnouncedToOtherDatabases() async throws {
        let store = try TestStore(.postgres)
        let worker = try await store.open().storage
        let listener = try await store.open().storage
        let feed = try #require(try await listener.changes())
        var other = feed.makeAsyncIterator()
        let long = String(repeating: "\u{1}", count: 1_500)
        let pair = ["a" + String(repeating: "\u{7}", count: 700), "b" + String(repeating: "\u{1F}", count: 700)]
        // Too long for any notification once escaped: the other database reads every stored queue.
        _ = try await worker.save([NewTask(key: "one", collection: "c", queueName: long, payload: Data())])
        #expect(await other.next() == [.queuesChanged([long])])
        _ = try await worker.save(pair.map { NewTask(key: $0, collection: "c", queueName: $0, payload: Data()) })
        var heard: [String] = []
        while heard.count < 2, let changes = await other.next() {
            for case .queuesChanged(let names) in changes { heard += names }
        }
        #expect(heard.sorted() == pair.sorted(), "each name arrives as saved, in notifications of its own")
        #expect(try await listener.tasks(inQueue: long).map(\.key) == ["one"])
    }

    @Test func settingUpTheSameNameTwiceOnOneDatabaseIsStillAnError() async throws {
        let database = try await TestStore(.postgres).open()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: RecordingHandler<TestAction>())
        await #expect { try await TaskQueueBroker.setup(database: database, name: "h", handler: RecordingHandler<TestAction>()) } throws: { error in
            (error as? TaskBrokerError)?.code == .queueAlreadyClaimed
        }
        await broker.shutdown()
    }

    @Test func aSchemaWrittenByANewerVersionIsRefused() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        try await database.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "UPDATE \"\(store.schema)\".meta SET value = 99 WHERE name = 'schema_version'"))
        }
        await #expect { _ = try await store.open() } throws: { error in
            guard let error = error as? TaskBrokerError else { return false }
            return error.code == .incompatibleSchema && error.message.contains("99")
        }
    }

    /// A database that the previous version (2) wrote: its finish function lacks version 3's
    /// setting (no sequential scans). Opening it migrates it: the function is created anew, the
    /// stored actions stay, and they still run to completion through the new function.
    @Test func aSchemaWrittenByTheVersionBeforeIsMigrated() async throws {
        let store = try TestStore(.postgres)
        let schema = "\"\(store.schema)\""
        let old = try await store.open()
        _ = try await old.storage.save([NewTask(key: "a", collection: "c", queueName: "q", payload: Data())])
        /// The schema version and the finish function's settings.
        func state(_ database: TaskDatabase) async throws -> (version: Int64, settings: String) {
            try await database.write { tx in
                var state: (Int64, String) = (0, "")
                let sql = """
                    SELECT (SELECT value FROM \(schema).meta WHERE name = 'schema_version'),
                           coalesce(array_to_string(proconfig, ','), '')
                    FROM pg_proc WHERE oid = '\(schema).finish'::regproc
                    """
                for try await row in try await tx.query(PostgresQuery(unsafeSQL: sql)).decode((Int64, String).self) {
                    state = row
                }
                return (state.0, state.1)
            }
        }
        try await old.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "ALTER FUNCTION \(schema).finish RESET ALL"))
            try await tx.execute(PostgresQuery(unsafeSQL: "UPDATE \(schema).meta SET value = 2 WHERE name = 'schema_version'"))
        }
        let before = try await state(old)
        try #require(before.version == 2 && before.settings.isEmpty, "set up as version 2 wrote it: \(before)")

        let migrated = try await store.open()
        let after = try await state(migrated)
        #expect(after.version == PostgresSchema.version)
        #expect(after.settings == "enable_seqscan=off", "the finish function was created anew: \(after.settings)")
        let stored = try await migrated.storage.tasks(inQueue: "q")
        #expect(stored.map(\.key) == ["a"], "the stored action stays")
        let epochs = try await migrated.storage.claimGranted(stored, owner: "w")
        #expect(try await migrated.storage.finish([.completed(stored[0], epoch: epochs[0])], owner: "w") == TaskFinishReport())
        #expect(try await migrated.storage.tasks(inQueue: "q").isEmpty)
    }

    /// PostgreSQL's B-tree indexes take entries of at most 2,704 bytes after compression: a name
    /// past 2,600 bytes is refused up front with `.invalidName`, whatever its letters, and one of
    /// 2,600 bytes that do not compress is stored and runs.
    @Test func namesPastTheIndexLimitAreRefusedWithATypedError() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        var generator = SplitMix64(state: 42)
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        let incompressible = String((0..<2_600).map { _ in letters[Int(generator.next() % UInt64(letters.count))] })
        for action in [
            TestAction(key: "k", queueName: incompressible + "x"),
            TestAction(key: incompressible, collection: "c", queueName: "q"),
        ] {
            await #expect {
                try await database.save([TestAction(key: "other", queueName: "q"), action])
            } throws: { error in
                (error as? TaskBrokerError)?.code == .invalidName
            }
        }
        #expect(try await database.snapshot().isEmpty, "nothing of the refused saves was stored")
        try await database.save(TestAction(key: "k", queueName: incompressible))
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: String(incompressible.prefix(10)), handler: handler)
        #expect(await handler.handled.values(count: 1) == ["k"])
        await broker.shutdown()
    }

    /// A database that version 3 wrote (no broker table), with a lease granted before the
    /// migration: opening it migrates it to the current version, whose broker table refuses overlapping
    /// names; the stored action stays, and the lease's outcome stores through the finish function,
    /// which version 4 leaves as it was (workers of version 3 go on during a rolling upgrade).
    @Test func aSchemaWrittenByVersion3IsMigratedAndItsLeasesStillFinish() async throws {
        let store = try TestStore(.postgres)
        let schema = "\"\(store.schema)\""
        let old = try await store.open()
        let stored = try await old.storage.save([NewTask(key: "a", collection: "c", queueName: "q", payload: Data())])
        let epochs = try await old.storage.claimGranted(stored, owner: "old")
        try await old.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "DROP TABLE \(schema).broker"))
            try await tx.execute(PostgresQuery(unsafeSQL: "UPDATE \(schema).meta SET value = 3 WHERE name = 'schema_version'"))
        }

        let migrated = try await store.open()
        let version = try await migrated.write { tx in
            var version: Int64 = 0
            for try await value in try await tx.query(PostgresQuery(unsafeSQL: "SELECT value FROM \(schema).meta WHERE name = 'schema_version'")).decode(Int64.self) {
                version = value
            }
            return version
        }
        #expect(version == PostgresSchema.version)
        #expect(try await migrated.storage.tasks(inQueue: "q").map(\.key) == ["a"], "the stored action stays")
        #expect(
            try await old.storage.finish([.completed(stored[0], epoch: epochs[0])], owner: "old") == TaskFinishReport(),
            "the running worker's outcome stores"
        )
        let first = try await TaskQueueBroker.setup(database: migrated, name: "mail", handler: RecordingHandler<TestAction>())
        await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskQueueBroker.setup(database: try await store.open(), name: "mailer", handler: RecordingHandler<TestAction>())
        }
        await first.shutdown()
    }

    /// A save numbered (its revision drawn) before another but committed after it, and after a
    /// broker read the queue, still runs: a revision drawn before what a read saw is not proof
    /// that the read saw the action (PostgreSQL numbers saves before they commit).
    @Test func anActionCommittedAfterALaterNumberedSaveWasReadStillRuns() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        // The queue's row exists (a queue's row stays): the held transaction below locks nothing
        // the second save needs.
        try await database.save(TestAction(key: "warm", queueName: "h-q"))
        _ = try await database.delete(key: "warm", collection: "actions")
        let numbered = EventCollector<Bool>()
        let (commit, commitNow) = AsyncStream<Void>.makeStream()
        let held = Task {
            try await database.write { tx in
                try await tx.save(TestAction(key: "first", queueName: "h-q"))
                numbered.record(true)
                for await _ in commit { break }
            }
        }
        _ = await numbered.values(count: 1)
        try await database.save(TestAction(key: "second", queueName: "h-q"))
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        #expect(await handler.handled.values(count: 1) == ["second"], "the read saw only the committed save")
        commitNow.yield()
        try await held.valueOrCancel
        #expect(await handler.handled.values(count: 2) == ["second", "first"])
        await broker.shutdown()
    }

    /// Workers often run under a role that may read and write the tables but not create any. Once
    /// the owner's role has migrated the schema, such a worker opens it and runs actions. It used to
    /// fail at every start: the migration ran `CREATE SCHEMA IF NOT EXISTS` whatever the version.
    @Test func aWorkerRoleThatMayNotCreateTablesOpensASchemaAtThisVersion() async throws {
        let store = try TestStore(.postgres)
        let owner = try await store.open()
        let role = "worker_\(store.schema)"
        let schema = "\"\(store.schema)\""
        try await owner.write { tx in
            for statement in [
                "CREATE ROLE \(role) LOGIN PASSWORD 'worker'",
                "GRANT USAGE ON SCHEMA \(schema) TO \(role)",
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \(schema) TO \(role)",
                "GRANT USAGE ON ALL SEQUENCES IN SCHEMA \(schema) TO \(role)",
            ] {
                try await tx.execute(PostgresQuery(unsafeSQL: statement))
            }
        }
        var configuration = try store.postgresConfiguration()
        configuration.username = role
        configuration.password = "worker"
        let worker = try await TaskDatabase.postgres(configuration: configuration)
        await #expect(throws: (any Error).self, "the role may not create tables") {
            try await worker.write { tx in try await tx.execute(PostgresQuery(unsafeSQL: "CREATE TABLE \(schema).extra (x int)")) }
        }
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: worker, name: "h", handler: handler)
        try await worker.save(TestAction(key: "a", queueName: "h-q"))
        #expect(await handler.handled.values(count: 1) == ["a"])
        await broker.shutdown()
        try await owner.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "DROP OWNED BY \(role)"))
            try await tx.execute(PostgresQuery(unsafeSQL: "DROP ROLE \(role)"))
        }
    }

    @Test func manyWorkersStartingAtOnceOnAnEmptySchemaMigrateItOnce() async throws {
        let store = try TestStore(.postgres)
        let databases = try await withThrowingTaskGroup(of: TaskDatabase.self) { group in
            for _ in 0..<6 {
                group.addTask { try await store.open() }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(databases.count == 6)
        try await databases[0].save(TestAction(key: "a", queueName: "h-q"))
        #expect(try await databases[5].snapshot().map(\.name) == ["h-q"], "every worker sees one schema")
    }

    @Test func aWrongPasswordIsATypedErrorThatNamesTheHostAndThePassword() async throws {
        var configuration = try TestStore(.postgres).postgresConfiguration()
        configuration.password = "not-the-password"
        await #expect { _ = try await TaskDatabase.postgres(configuration: configuration) } throws: { error in
            guard let error = error as? TaskBrokerError else { return false }
            return error.code == .connectionFailed && error.message.contains("127.0.0.1") && error.message.contains("password")
        }
    }

    @Test func aMissingDatabaseIsATypedErrorThatNamesIt() async throws {
        var configuration = try TestStore(.postgres).postgresConfiguration()
        configuration.database = "no_such_database"
        await #expect { _ = try await TaskDatabase.postgres(configuration: configuration) } throws: { error in
            guard let error = error as? TaskBrokerError else { return false }
            return error.code == .connectionFailed && error.message.contains("no_such_database") && error.message.contains("does not exist")
        }
    }

    @Test func anUnreachableServerIsATypedErrorNotAHang() async throws {
        var configuration = try TestStore(.postgres).postgresConfiguration()
        configuration.port = 1  // nothing listens on port 1 of loopback
        configuration.connectTimeout = .seconds(2)
        await #expect { _ = try await TaskDatabase.postgres(configuration: configuration) } throws: { error in
            guard let error = error as? TaskBrokerError else { return false }
            return error.code == .connectionFailed && error.message.contains("127.0.0.1:1") && error.message.contains("server runs")
        }
    }

    @Test(arguments: [
        "mysql://u@h/d", "postgres://h/d", "postgres://u@/d", "postgres://u@h/d?lease=-1", "postgres://u@h/d?sslmode=require",
        "postgres://u@h/d?x=1",
        // Past Int64's milliseconds: the conversion trapped.
        "postgres://u@h/d?lease=1e17", "postgres://u@h/d?lease=86401",
    ])
    func anUnusableURLIsATypedError(_ url: String) {
        #expect { _ = try TaskDatabase.PostgresConfiguration(url: url) } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidConfiguration
        }
    }

    @Test func aURLSetsEveryField() throws {
        let configuration = try TaskDatabase.PostgresConfiguration(url: "postgresql://app%40x:p%2Fw@db.internal:6543/jobs?schema=work&lease=2.5")
        #expect(configuration.host == "db.internal" && configuration.port == 6543)
        #expect(configuration.username == "app@x" && configuration.password == "p/w" && configuration.database == "jobs")
        #expect(configuration.schema == "work" && configuration.leaseDuration == .milliseconds(2_500))
    }

    /// A schema name PostgreSQL reserves, a lease of a century (every claim would overflow the
    /// server's timestamps), a connect timeout past Int64's milliseconds (trapped) and an
    /// operation timeout of zero (every operation would fail).
    @Test(arguments: ["schema", "lease", "connect", "operation"])
    func anUnusableSettingIsRefusedBeforeConnecting(_ setting: String) async throws {
        var configuration = try TestStore(.postgres).postgresConfiguration()
        switch setting {
        case "schema": configuration.schema = "pg_tasks"
        case "lease": configuration.leaseDuration = .seconds(100 * 365 * 86_400)
        case "operation": configuration.operationTimeout = .zero
        default: configuration.connectTimeout = .seconds(Int64.max / 100)
        }
        await #expect { _ = try await TaskDatabase.postgres(configuration: configuration) } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidConfiguration
        }
    }

    @Test func anUnusableSchemaNameIsRefusedBeforeConnecting() async throws {
        var configuration = try TestStore(.postgres).postgresConfiguration()
        configuration.schema = "Robert'); DROP TABLE students;--"
        await #expect { _ = try await TaskDatabase.postgres(configuration: configuration) } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidConfiguration
        }
    }

}

/// The server restarts, or drops every connection, under a running broker. Its own suite, run by
/// `make test-all` in a `swift test` of its own (`--filter PostgresRestartTests`), one test at a
/// time: each drops every connection to the server, those of tests running beside it too.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct PostgresRestartTests {
    /// Every run of the handler, once `distinct` different keys have run: a re-run (at least once)
    /// repeats a key, so counting runs alone could stop short of the last actions. Returns early
    /// if the wait is cancelled.
    private static func runs(of handler: RecordingHandler<TestAction>, untilDistinct distinct: Int) async -> [String] {
        var count = distinct
        while true {
            let handled = await handler.handled.values(count: count)
            let seen = Set(handled).count
            if seen >= distinct || handled.count < count { return handled }
            count += distinct - seen
        }
    }

    @Test func aServerRestartMidRunLosesNothingAndTheBrokerGoesOn() async throws {
        let restart = try PostgresTestServer.restartCommand()
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler,
            configuration: .init(
                logger: store.logger ?? .init(label: "quiet", factory: { _ in SwiftLogNoOpLogHandler() }),
                storageRetryBackoff: .init(initial: .milliseconds(50), maximum: .milliseconds(500))
            )
        )
        try await database.save((0..<20).map { TestAction(key: "before\($0)", queueName: "h-q\($0 % 4)") })
        _ = await handler.handled.values(count: 20)
        try await PostgresTestServer.run(restart)
        // The pool and the change feed reconnect; a save may fail while the server comes back.
        let saved = try await Self.save((0..<20).map { TestAction(key: "after\($0)", queueName: "h-q\($0 % 4)") }, to: database)
        #expect(saved, "the database takes saves again after the restart")
        let handled = await Self.runs(of: handler, untilDistinct: 40)
        #expect(Set(handled).count == 40, "every action ran")
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }

    /// Operations on connections that a restart closed end at once, and the broker tries again:
    /// none waits for `operationTimeout`. postgres-nio writes a query to a channel that is already
    /// closing without failing it, and its pool can hand out a connection whose close it has not
    /// processed yet; such an operation used to stand still until the time limit ended it (30 s
    /// by default), and its queue with it, after most restarts. Here the limit is ten minutes,
    /// so an operation that waited for it would run past the test's time limit.
    @Test func aRestartStallsNoQueueUntilTheOperationTimeout() async throws {
        let restart = try PostgresTestServer.restartCommand()
        let store = try TestStore(.postgres)
        let log = LogRecorder()
        var configuration = try store.postgresConfiguration(leaseDuration: .seconds(2))
        configuration.operationTimeout = .seconds(600)
        configuration.logger = Logger(label: "pool", factory: { _ in log })
        let database = try await TaskDatabase.postgres(configuration: configuration)
        // A run takes 20 ms, so that the queues have work stored when the server restarts.
        let handler = RecordingHandler<TestAction> { _ in try? await Task.sleep(for: .milliseconds(20)) }
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler,
            configuration: .init(storageRetryBackoff: .init(initial: .milliseconds(50), maximum: .milliseconds(500)))
        )
        var distinct = 0
        // Five restarts: a stalled operation followed about one restart in three without the fix.
        for round in 0..<5 {
            try await database.save((0..<320).map { TestAction(key: "r\(round)-\($0)", queueName: "h-q\($0 % 32)") })
            _ = await handler.handled.values(count: distinct + 32)
            try await PostgresTestServer.run(restart)
            let restarted = ContinuousClock.now
            distinct += 320
            let handled = await Self.runs(of: handler, untilDistinct: distinct)
            #expect(Set(handled).count == distinct, "round \(round): every action ran")
            print("restart \(round + 1): every queue drained \(restarted.duration(to: .now)) after the server was back")
        }
        #expect(!log.messages.contains { $0.contains("did not answer within") }, "no operation waited for its time limit")
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }

    @Test func droppedConnectionsMidRunLoseNothingAndTheBrokerListensAgain() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler,
            configuration: .init(
                logger: store.logger ?? .init(label: "quiet", factory: { _ in SwiftLogNoOpLogHandler() }),
                storageRetryBackoff: .init(initial: .milliseconds(50), maximum: .milliseconds(500))
            )
        )
        try await database.save((0..<20).map { TestAction(key: "before\($0)", queueName: "h-q\($0 % 4)") })
        _ = await handler.handled.values(count: 20)
        // Another process's pool: the broker hears of its saves only through NOTIFY (or the
        // catch-up read after its listening connection comes back).
        let other = try await store.open()
        // The server stays up and drops every connection of this test but the one asking: the
        // broker's pool, its listening connection and `other`'s pool (pg_terminate_backend, as an
        // administrator or a failover proxy does). Their application name names the test's schema
        // (`taskbroker <schema>`, `taskbroker feed <schema>`); the other tests running meanwhile
        // keep theirs.
        let dropped = try await other.write { tx -> Int in
            var count = 0
            let sql: PostgresQuery = """
                SELECT count(pg_terminate_backend(pid))::int8 FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                  AND position(\(store.schema) in application_name) > 0
                """
            for try await value in try await tx.query(sql).decode(Int.self) {
                count = value
            }
            return count
        }
        #expect(dropped >= 2, "the broker's pool and its listening connection were dropped")
        let saved = try await Self.save((0..<20).map { TestAction(key: "after\($0)", queueName: "h-q\($0 % 4)") }, to: other)
        #expect(saved, "the pool reconnects and takes saves again")
        _ = await Self.runs(of: handler, untilDistinct: 40)
        // By now the broker has listened again (it reads the queues after it does): a save from the
        // other pool starts without any read of the broker's own.
        try await other.save((0..<8).map { TestAction(key: "later\($0)", queueName: "h-q\($0 % 4)") })
        let handled = await Self.runs(of: handler, untilDistinct: 48)
        #expect(Set(handled).count == 48, "every action ran")
        // Each queue ran its actions in the order they were saved (a re-run repeats a key in place).
        for queue in 0..<4 {
            let saved = ["before", "after"].flatMap { batch in stride(from: queue, to: 20, by: 4).map { "\(batch)\($0)" } }
                + stride(from: queue, to: 8, by: 4).map { "later\($0)" }
            var ran: [String] = []
            for key in handled where saved.contains(key) && ran.last != key {
                ran.append(key)
            }
            #expect(ran == saved, "queue h-q\(queue)")
        }
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }

    /// Saves `actions`, trying again every 100 ms for 10 s while the connections come back.
    /// - Returns: Whether a save went through.
    private static func save(_ actions: [TestAction], to database: TaskDatabase) async throws -> Bool {
        for _ in 0..<100 {
            do {
                try await database.save(actions)
                return true
            } catch {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        return false
    }
}
#endif
