// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Foundation
import Logging
import PostgresNIO
import TaskBroker
import TaskBrokerPostgres
import Testing

/// Every statement that waits for queues' lease rows locks them in name order. A finish and the
/// lease renewal that locked the same rows in different orders deadlocked under load (PostgreSQL
/// aborted one of them after a second: seen in the burn-down benchmark with short leases and two
/// finishes under way at once). The renewal now waits for no row at all.
///
/// Each test holds the row of queue "q-a" in another transaction, starts the operation on "q-b"
/// and "q-a" (in that order), waits until the server shows it waiting for the lock, and then
/// locks "q-b" without waiting: that works only if the operation has not locked "q-b" first.
@Suite(.timeLimit(.minutes(3)))
struct PostgresLockOrderTests {
    @Test func aFinishLocksTheLeasesInNameOrder() async throws {
        let report = try await whileHoldingQueueA { storage, saved, epochs in
            try await storage.finish([.completed(saved[1], epoch: epochs[1]), .completed(saved[0], epoch: epochs[0])], owner: "w")
        }
        #expect(report == TaskFinishReport(), "both outcomes are stored once the other transaction ends")
    }

    /// A caller's transaction holds the row of the action running in "q-a"; the finish of that
    /// action locks the lease of "q-a" and waits for the caller. The renewal of both leases does
    /// not wait behind them: it renews "q-b" now and counts "q-a" as still held. It used to wait
    /// (for as long as the caller's transaction lasted), renewing nothing, so the worker's other
    /// leases expired and other workers took over queues whose actions still ran here.
    @Test func aRenewalDoesNotWaitForALeaseAFinishHoldsBehindACallersTransaction() async throws {
        let (store, database, saved, epochs) = try await twoRunningActions()
        let storage = database.storage
        let schema = "\"\(store.schema)\""
        /// The seconds the lease of `queue` has left.
        func left(_ queue: String) async throws -> Double {
            try await database.write { tx in
                var left = 0.0
                let sql = "SELECT extract(epoch FROM expires_at - clock_timestamp())::float8 FROM \(schema).queue WHERE name = '\(queue)'"
                for try await value in try await tx.query(PostgresQuery(unsafeSQL: sql)).decode(Double.self) { left = value }
                return left
            }
        }
        try await database.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "UPDATE \(schema).queue SET expires_at = clock_timestamp() + interval '5 seconds'"))
        }
        let caller = try await store.open()
        let (locked, lockedSignal) = AsyncStream<Void>.makeStream()
        let (end, endSignal) = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await caller.write { tx -> Void in
                try await tx.execute(PostgresQuery(unsafeSQL: "SELECT 1 FROM \(schema).action WHERE key = 'a' FOR UPDATE"))
                lockedSignal.yield()
                for await _ in end { break }
            }
        }
        for await _ in locked { break }
        let finish = Task { try await storage.finish([.completed(saved[0], epoch: epochs[0])], owner: "w") }
        try await waitUntil(caller, schema: store.schema, backendsWaitingForALock: 1)

        let leases = [TaskQueueLease(queueName: "q-a", epoch: epochs[0]), TaskQueueLease(queueName: "q-b", epoch: epochs[1])]
        let lost = try await storage.renew(leases, owner: "w", leaseDuration: .seconds(30))
        #expect(lost.isEmpty, "q-a is still held: its finish is under way")
        #expect(try await left("q-b") > 20, "q-b was renewed without waiting")
        endSignal.yield()
        try await holder.valueOrCancel
        #expect(try await finish.valueOrCancel == TaskFinishReport())
    }

    @Test func aReleaseLocksTheLeasesInNameOrder() async throws {
        try await whileHoldingQueueA { storage, _, epochs in
            try await storage.release(
                [TaskQueueLease(queueName: "q-b", epoch: epochs[1]), TaskQueueLease(queueName: "q-a", epoch: epochs[0])], owner: "w"
            )
        }
    }

    /// Saves and claims an action in "q-a" and one in "q-b" (owner "w"), holds the row of "q-a" in
    /// another transaction, runs `operation` until the server shows it waiting for that row, checks
    /// that the row of "q-b" is free to lock, ends the transaction and returns what `operation` returned.
    @discardableResult
    private func whileHoldingQueueA<Result: Sendable>(
        _ operation: @escaping @Sendable (any TaskStorage, [StoredTask], [Int64]) async throws -> Result
    ) async throws -> Result {
        let (store, database, saved, epochs) = try await twoRunningActions()
        let storage = database.storage
        let queueTable = "\"\(store.schema)\".queue"
        let locker = try await store.open()
        let (lockedA, lockedASignal) = AsyncStream<Void>.makeStream()
        let (tryB, tryBSignal) = AsyncStream<Void>.makeStream()
        let (answer, answerSignal) = AsyncStream<Bool>.makeStream()
        // Holds "q-a"; once told, tries "q-b" without waiting and reports whether it got it.
        let holder = Task {
            try await locker.write { tx -> Void in
                try await tx.execute(PostgresQuery(unsafeSQL: "SELECT 1 FROM \(queueTable) WHERE name = 'q-a' FOR UPDATE"))
                lockedASignal.yield()
                for await _ in tryB { break }
                do {
                    try await tx.execute(PostgresQuery(unsafeSQL: "SELECT 1 FROM \(queueTable) WHERE name = 'q-b' FOR UPDATE NOWAIT"))
                    answerSignal.yield(true)
                } catch {
                    // lock_not_available: the operation locked q-b before waiting for q-a.
                    answerSignal.yield(false)
                }
            }
        }
        for await _ in lockedA { break }
        let running = Task { try await operation(storage, saved, epochs) }
        try await waitUntil(locker, schema: store.schema, backendsWaitingForALock: 1)
        tryBSignal.yield()
        var gotB = false
        for await got in answer {
            gotB = got
            break
        }
        try await holder.valueOrCancel
        #expect(gotB, "the row of q-b was not locked by the operation waiting for q-a")
        return try await running.valueOrCancel
    }
}

/// A finish that keeps a queue's lease for its next head leaves the lease's row as it is (locked,
/// not rewritten) while eleven twelfths of the lease are left, and extends it to a full lease when
/// less is left; the epoch stays the same either way.
@Suite(.timeLimit(.minutes(3)))
struct PostgresKeptLeaseTests {
    @Test func aKeptLeaseIsExtendedOnlyWhenLessThanElevenTwelfthsOfItIsLeft() async throws {
        let store = try TestStore(.postgres)
        // Ten minutes: the first finish must come while eleven twelfths of the lease are left, that
        // is within 50 s of the claim, a margin that a stall of a loaded machine stays inside.
        let leaseDuration: Duration = .seconds(600)
        let database = try await store.open(leaseDuration: leaseDuration)
        let storage = database.storage
        let saved = try await storage.save((0..<4).map { NewTask(key: "a\($0)", collection: "c", queueName: "q", payload: Data()) })
        let epochs = try await storage.claimGranted([saved[0]], owner: "w", leaseDuration: leaseDuration)
        let queueTable = "\"\(store.schema)\".queue"
        /// The lease's epoch, its row version and the seconds it has left.
        func lease() async throws -> (epoch: Int64, version: String, left: Double) {
            try await database.write { tx in
                var row: (Int64, String, Double) = (0, "", 0)
                let sql = "SELECT epoch, xmin::text, extract(epoch FROM expires_at - clock_timestamp())::float8 FROM \(queueTable) WHERE name = 'q'"
                for try await value in try await tx.query(PostgresQuery(unsafeSQL: sql)).decode((Int64, String, Double).self) {
                    row = value
                }
                return (row.0, row.1, row.2)
            }
        }
        let claimed = try await lease()

        // Nearly the whole lease is left: the row is not written, the epoch stays.
        #expect(claimed.epoch == epochs[0], "the claim answers the lease's epoch")
        let first = try await storage.finish([.completed(saved[0], epoch: epochs[0])], claimingNext: ["q": saved[1]], owner: "w", leaseDuration: leaseDuration)
        #expect(first.continued == ["q"])
        let kept = try await lease()
        #expect(kept.epoch == claimed.epoch && kept.version == claimed.version, "the row was locked, not rewritten")

        // Half the lease is left: the next finish extends it to a full lease, under the same epoch.
        try await database.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "UPDATE \(queueTable) SET expires_at = clock_timestamp() + interval '300 seconds' WHERE name = 'q'"))
        }
        let second = try await storage.finish([.completed(saved[1], epoch: epochs[0])], claimingNext: ["q": saved[2]], owner: "w", leaseDuration: leaseDuration)
        #expect(second.continued == ["q"])
        let extended = try await lease()
        #expect(extended.epoch == claimed.epoch)
        #expect(extended.left > 550, "extended to a full lease: \(extended.left) s left")

        // The last completion with no next head releases the lease.
        #expect(
            try await storage.finish([.completed(saved[2], epoch: epochs[0])], claimingNext: [:], owner: "w", leaseDuration: leaseDuration)
                == TaskFinishReport()
        )
        #expect(try await lease().left <= 0, "released")
    }
}

/// A finish finds every row it touches through an index. With the burn-down benchmark's 1,000
/// queues, the plan of its lease updates scanned the whole queue table twice at every finish (to
/// release and to extend leases, also with none to release or extend): ~10 rows per outcome.
@Suite(.timeLimit(.minutes(3)))
struct PostgresFinishScanTests {
    @Test func aFinishFindsEveryRowThroughAnIndex() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open(leaseDuration: .seconds(30))
        let storage = database.storage
        let saved = try await storage.save(
            [("a", "q-a"), ("b", "q-b"), ("b2", "q-b")].map { NewTask(key: $0.0, collection: "c", queueName: $0.1, payload: Data()) }
        )
        _ = try await storage.claimGranted([saved[0], saved[1]], owner: "w")
        let schema = "\"\(store.schema)\""
        // 1,000 queues known, their statistics gathered: the benchmark's burn-down, where the plan
        // chose to scan the queue table (eleven pages) rather than look up ten names in its index.
        try await database.write { tx in
            try await tx.execute(PostgresQuery(unsafeSQL: "INSERT INTO \(schema).queue (name) SELECT 'idle-' || g FROM generate_series(1, 998) g"))
            try await tx.execute(PostgresQuery(unsafeSQL: "ANALYZE \(schema).queue, \(schema).action"))
        }
        // The function as the storage calls it: a completes and its lease is released; b completes
        // and its lease is kept for b2. The sequential scans of each table are counted before and
        // after it (the counts also hold this connection's earlier transactions not yet reported).
        let (kinds, before, after) = try await database.write { tx -> ([Int16], [String: Int64], [String: Int64]) in
            var epochs: [String: Int64] = [:]
            for try await (name, epoch) in try await tx.query(
                PostgresQuery(unsafeSQL: "SELECT name, epoch FROM \(schema).queue")
            ).decode((String, Int64).self) {
                epochs[name] = epoch
            }
            func scans() async throws -> [String: Int64] {
                var scans: [String: Int64] = [:]
                for try await (table, count) in try await tx.query(
                    PostgresQuery(unsafeSQL: "SELECT relname::text, seq_scan FROM pg_stat_xact_user_tables WHERE schemaname = '\(store.schema)'")
                ).decode((String, Int64).self) {
                    scans[table] = count
                }
                return scans
            }
            let before = try await scans()
            let finish: PostgresQuery = """
                SELECT r_kinds FROM \(unescaped: schema).finish(
                    \(["q-a", "q-b"])::text[], \([epochs["q-a"] ?? -1, epochs["q-b"] ?? -1])::int8[],
                    \([saved[0].position, saved[1].position])::int8[], \([saved[0].revision, saved[1].revision])::int8[],
                    \([Int16(0), Int16(0)])::int2[], \([0.0, 0.0])::float8[],
                    \([Int64(-1), saved[2].position])::int8[], \([Int64(-1), saved[2].revision])::int8[], \([Int32(0), Int32(0)])::int4[],
                    \(["", ""])::text[], \([0.0, 0.0])::float8[],
                    'w', 30000, 27500, 'test', 'test', 4900, 3000)
                """
            var kinds: [Int16] = []
            for try await value in try await tx.query(finish).decode([Int16].self) {
                kinds = value
            }
            return (kinds, before, try await scans())
        }
        // Released q-a (0), kept q-b (1), deleted a and b (2, 2), the count of notifications sent (4).
        #expect(kinds.sorted() == [0, 1, 2, 2, 4], "the finish did its work: \(kinds)")
        for table in ["queue", "action"] {
            #expect(after[table] == before[table], "sequential scans of \(table): \(before[table] ?? -1) before, \(after[table] ?? -1) after")
        }
        #expect(try await storage.tasks(inQueues: ["q-a", "q-b"]).mapValues { $0.map(\.key) } == ["q-b": ["b2"]])
    }
}

/// A read returns each queue's actions in enqueue order, though PostgreSQL returns rows in the order
/// it stores them, and a replaced action's new version may be stored after the others.
@Suite(.timeLimit(.minutes(3)))
struct PostgresReadOrderTests {
    @Test func aReadReturnsEachQueueInEnqueueOrderWhereverItsRowsAreStored() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let storage = database.storage
        // Payloads of ~1.9 KB that do not compress: four fill a page, so the new version of "a"
        // goes to another page, after the others.
        func payload() -> Data { Data((0..<1_900).map { _ in UInt8.random(in: 0...255) }) }
        let keys = ["a", "b", "c", "d"]
        _ = try await storage.save(keys.map { NewTask(key: $0, collection: "c", queueName: "q1", payload: payload()) })
        _ = try await storage.save([NewTask(key: "a", collection: "c", queueName: "q1", payload: payload())])
        let stored = try await database.write { tx -> [String] in
            let sql = "SELECT key FROM \"\(store.schema)\".action ORDER BY ctid"
            var keys: [String] = []
            for try await key in try await tx.query(PostgresQuery(unsafeSQL: sql)).decode(String.self) {
                keys.append(key)
            }
            return keys
        }
        try #require(stored != keys, "the rows are stored out of enqueue order (else this test proves nothing): \(stored)")
        let read = try await storage.tasks(inQueues: ["q1"])
        #expect(read["q1"]?.map(\.key) == keys)
        #expect(try await storage.tasks(inQueue: "q1").map(\.key) == keys)
    }
}

/// A save that replaces running actions in an order opposite to a finish's can deadlock with that
/// finish; PostgreSQL then aborts one of the two after `deadlock_timeout` (which one depends on
/// timing: both were seen). The aborted one is run again, so neither caller sees an error.
@Suite(.timeLimit(.minutes(3)))
struct PostgresDeadlockRetryTests {
    @Test func aSaveAndAFinishThatDeadlockBothGoThrough() async throws {
        let log = LogRecorder()
        let (store, database, saved, epochs) = try await twoRunningActions(logger: Logger(label: "deadlock", factory: { _ in log }))
        let storage = database.storage
        let actionTable = "\"\(store.schema)\".action"
        let observer = try await store.open()
        // Another transaction holds a's row, so that the finish waits for it before b's, and the
        // save (which replaces b, then a) locks b's row and then waits for a's too.
        let (locked, lockedSignal) = AsyncStream<Void>.makeStream()
        let (release, releaseSignal) = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await observer.write { tx -> Void in
                try await tx.execute(PostgresQuery(unsafeSQL: "SELECT 1 FROM \(actionTable) WHERE key = 'a' FOR UPDATE"))
                lockedSignal.yield()
                for await _ in release { break }
            }
        }
        for await _ in locked { break }
        let finish = Task { try await storage.finish([.completed(saved[0], epoch: epochs[0]), .completed(saved[1], epoch: epochs[1])], owner: "w") }
        try await waitUntil(observer, schema: store.schema, backendsWaitingForALock: 1)
        let save = Task {
            try await storage.save([
                NewTask(key: "b", collection: "c", queueName: "q-b", payload: Data("b2".utf8)),
                NewTask(key: "a", collection: "c", queueName: "q-a", payload: Data("a2".utf8)),
            ])
        }
        try await waitUntil(observer, schema: store.schema, backendsWaitingForALock: 2)
        // The finish takes a's row, then waits for b's, which the save holds while it waits for a's.
        releaseSignal.yield()
        try await holder.valueOrCancel
        let resaved = try await save.valueOrCancel
        #expect(resaved.map(\.key) == ["b", "a"], "the save went through")
        let report = try await finish.valueOrCancel
        #expect(report.fenced.isEmpty, "the finish went through, its leases still held: \(report)")
        #expect(try await storage.tasks(inQueue: "q-a").map(\.payload) == [Data("a2".utf8)])
        #expect(try await storage.tasks(inQueue: "q-b").map(\.payload) == [Data("b2".utf8)])
        // PostgreSQL broke a deadlock (else this test proves nothing), and the storage ran the
        // aborted statement again. On a loaded machine the retry can meet the other statement
        // again (a run of the whole suite logged two): how many rounds it takes is timing.
        let retries = log.messages.filter { $0.contains("aborted the attempt to") && $0.contains("deadlock detected") }
        #expect(!retries.isEmpty, "a statement was aborted and run again: \(log.messages)")
    }
}

/// Saves and claims (owner "w") action "a" in queue "q-a" and "b" in "q-b", on a new PostgreSQL
/// store with 30 s leases (logging to `logger`, if given); returns the epochs of their claims too.
private func twoRunningActions(logger: Logger? = nil) async throws -> (TestStore, TaskDatabase, [StoredTask], [Int64]) {
    let store = try TestStore(.postgres)
    var configuration = try store.postgresConfiguration(leaseDuration: .seconds(30))
    if let logger { configuration.logger = logger }
    let database = try await TaskDatabase.postgres(configuration: configuration)
    let storage = database.storage
    let saved = try await storage.save([
        NewTask(key: "a", collection: "c", queueName: "q-a", payload: Data("a".utf8)),
        NewTask(key: "b", collection: "c", queueName: "q-b", payload: Data("b".utf8)),
    ])
    let epochs = try await storage.claimGranted(saved, owner: "w")
    return (store, database, saved, epochs)
}

/// Waits until at least `count` other backends wait for a lock in a statement on `schema`
/// (other tests run at the same time).
private func waitUntil(_ database: TaskDatabase, schema: String, backendsWaitingForALock count: Int) async throws {
    var waiting = 0
    for _ in 0..<10_000 where waiting < count {
        waiting = try await database.write { tx -> Int in
            let sql = """
                SELECT count(*)::int8 FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
                  AND position('\(schema)' in query) > 0
                """
            var waiting = 0
            for try await value in try await tx.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) {
                waiting = value
            }
            return waiting
        }
    }
    try #require(waiting >= count, "\(count) backend(s) wait for a lock")
}
#endif
