import AsyncPrimitivesTesting
import Dispatch
import Foundation
import GRDB
@testable import QueuePersistence
import Synchronization
import Testing
import QueueCore
import QueueCoreTesting

@Suite(.timeLimit(.minutes(1)))
struct SQLiteJobPersisterTests {
    private static func pragma(_ name: String, _ persister: SQLiteJobPersister<CuteJob>) throws -> String? {
        try persister.store.pool.writeWithoutTransaction { db in
            try String.fetchOne(db, sql: "PRAGMA \(name)")
        }
    }

    @Test func databaseIsInWALModeWithSynchronousFullByDefault() throws {
        let directory = try TemporaryDirectory()
        let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: directory.file("a.sqlite").path)
        #expect(try Self.pragma("journal_mode", persister) == "wal")
        #expect(try Self.pragma("synchronous", persister) == "2") // FULL
    }

    @Test func synchronousNormalIsAnExplicitChoice() throws {
        let directory = try TemporaryDirectory()
        let persister = try SQLiteJobPersister(
            handling: CuteJob.self,
            queueName: "q",
            path: directory.file("a.sqlite").path,
            configuration: .init(synchronous: .normal)
        )
        #expect(try Self.pragma("synchronous", persister) == "1") // NORMAL
    }

    @Test func manyQueuesShareOneFileAndSurviveReopening() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("shared.sqlite").path
        let jobs = (0..<6).map { CuteJob(id: "job-\($0)", action: "\($0)") }
        do {
            let first = try SQLiteJobPersister(handling: CuteJob.self, queueName: "first", path: path)
            let second = try SQLiteJobPersister(handling: CuteJob.self, queueName: "second", path: path)
            try first.persist(Array(jobs[0..<3]))
            try second.persist(Array(jobs[3...]))
            try first.delete(jobs[1])
        }
        #expect(try SQLiteJobPersister(handling: CuteJob.self, queueName: "first", path: path).load() == [jobs[0], jobs[2]])
        #expect(try SQLiteJobPersister(handling: CuteJob.self, queueName: "second", path: path).load() == Array(jobs[3...]))
    }

    @Test func aFileThatIsNotADatabaseIsATypedError() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("garbage.sqlite")
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }).write(to: url)
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            _ = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: url.path)
        }
        #expect(error?.code == .corruptDatabase)
        #expect(error?.path == url.standardizedFileURL.path)
    }

    @Test func aTruncatedDatabaseIsATypedErrorNotACrash() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("truncated.sqlite").path
        do {
            let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
            try persister.persist((0..<500).map { CuteJob(id: "j\($0)", data: Data(repeating: 7, count: 200)) })
            // Move everything from the WAL into the main file, then drop the log.
            _ = try persister.store.pool.writeWithoutTransaction { db in
                try db.checkpoint(.truncate)
            }
        }
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(data.count > 8192)
        try data.prefix(data.count / 3).write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            let reopened = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
            _ = try reopened.load()
        }
        #expect(error?.code == .corruptDatabase)
    }

    @Test func aDatabaseFromANewerLibraryIsRefusedWithAClearError() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("newer.sqlite").path
        do {
            let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
            try persister.persist([CuteJob(id: "kept")])
            try persister.store.pool.write { db in
                try db.execute(sql: "UPDATE queuePersistenceMeta SET value = 2 WHERE key = 'schemaVersion'")
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('QueuePersistence.v2')")
            }
        }
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            _ = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
        }
        #expect(error?.code == .incompatibleSchema)
        #expect(error?.message.contains("newer QueuePersistence") == true)
        // The stored job was not touched.
        let queue = try DatabaseQueue(path: path)
        #expect(try queue.read { try String.fetchAll($0, sql: "SELECT jobID FROM queuePersistenceJob") } == ["kept"])
    }

    @Test func otherMigrationsOfTheUsersOwnInTheSameFileAreFine() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("app.sqlite").path
        do {
            let queue = try DatabaseQueue(path: path)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("app.v1") { db in try db.execute(sql: "CREATE TABLE note (text TEXT)") }
            try migrator.migrate(queue)
        }
        let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
        try persister.persist([CuteJob(id: "a")])
        #expect(try persister.load().map(\.id) == ["a"])
    }

    @Test func aCorruptRowIsQuarantinedReportedAndEveryOtherJobLoads() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("rows.sqlite").path
        let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
        let jobs = [CuteJob(id: "a"), CuteJob(id: "b"), CuteJob(id: "c")]
        try persister.persist(jobs)
        try persister.store.pool.write { db in
            try db.execute(sql: "UPDATE queuePersistenceJob SET payload = x'00ff' WHERE jobID = 'b'")
        }
        #expect(try persister.load() == [jobs[0], jobs[2]])
        #expect(persister.loadIssues.map(\.code) == [.corruptJob])
        #expect(persister.loadIssues.map(\.jobID) == ["b"])
        let count = try persister.store.pool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM queuePersistenceJob") }
        #expect(count == 2)
        let quarantined = try persister.store.pool.read {
            try Data.fetchAll($0, sql: "SELECT payload FROM queuePersistenceQuarantine WHERE jobID = 'b'")
        }
        #expect(quarantined == [Data([0x00, 0xff])]) // set aside, byte for byte
        #expect(try persister.load() == [jobs[0], jobs[2]])
        #expect(persister.loadIssues.isEmpty)
    }

    @Test func concurrentCallersShareOneCommit() async throws {
        let release = DispatchSemaphore(value: 0)
        let batches = Mutex<[[Int]]>([])
        let enqueued = EventCollector<Int>()
        let writer = GroupCommitWriter<Int>(maximumBatchSize: 100, didEnqueue: { enqueued.record($0) }) { operations in
            let first = batches.withLock { batches in
                batches.append(operations)
                return batches.count == 1
            }
            if first { release.wait() }
        }
        let returned = EventCollector<Int>()
        for operation in 0...10 {
            if operation == 1 {
                // The first caller now leads and is stuck in its commit.
                _ = await enqueued.values(count: 1)
            }
            Thread.detachNewThread {
                do {
                    try writer.submit(operation)
                    returned.record(operation)
                } catch {
                    returned.record(-1)
                }
            }
        }
        _ = await enqueued.values(count: 11)
        #expect(returned.count == 0) // nobody returns before its commit
        release.signal()
        let done = await returned.values(count: 11)
        #expect(Set(done) == Set(0...10))
        let committed = batches.withLock { $0 }
        #expect(committed.count == 2)
        #expect(committed.first == [0])
        #expect(Set(committed.last ?? []) == Set(1...10))
        #expect(writer.commits == 2)
    }

    @Test func oneFailingCallerDoesNotFailTheOthersInItsBatch() async throws {
        let release = DispatchSemaphore(value: 0)
        let enqueued = EventCollector<Int>()
        let first = Mutex(true)
        let writer = GroupCommitWriter<Int>(maximumBatchSize: 100, didEnqueue: { enqueued.record($0) }) {
            (operations: [Int]) throws(QueuePersistence.PersistenceError) in
            let isFirst = first.withLock { isFirst in
                let was = isFirst
                isFirst = false
                return was
            }
            if isFirst { release.wait() }
            if operations.contains(3) {
                throw QueuePersistence.PersistenceError(code: .writeFailed, message: "operation 3 is bad")
            }
        }
        let outcomes = EventCollector<(Int, Bool)>()
        for operation in 0...5 {
            if operation == 1 { _ = await enqueued.values(count: 1) }
            Thread.detachNewThread {
                do {
                    try writer.submit(operation)
                    outcomes.record((operation, true))
                } catch {
                    outcomes.record((operation, false))
                }
            }
        }
        _ = await enqueued.values(count: 6)
        release.signal()
        let results = await outcomes.values(count: 6)
        #expect(results.filter { !$0.1 }.map(\.0) == [3])
    }

    /// Another connection holds the write lock: a batch that waited out its busy timeout fails
    /// every caller in it at once. Committing each caller alone again waited out the timeout
    /// once more per caller, while all of them (and every caller after) stayed blocked.
    @Test func aBatchRefusedByAHeldLockFailsItsCallersWithoutWaitingOncePerCaller() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("held.sqlite").path
        var configuration = Configuration()
        configuration.busyMode = .timeout(0.1)
        let database = try DatabaseQueue(path: path, configuration: configuration)
        try await database.write { db in try db.execute(sql: "CREATE TABLE t (x INTEGER)") }
        let holder = try DatabaseQueue(path: path)
        let locked = EventCollector<Bool>()
        let unlocked = EventCollector<Bool>()
        let unlock = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                try holder.write { db in
                    try db.execute(sql: "INSERT INTO t VALUES (0)")
                    locked.record(true)
                    unlock.wait()
                }
                unlocked.record(true)
            } catch {
                unlocked.record(false)
            }
        }
        _ = await locked.values(count: 1)

        let enqueued = EventCollector<Int>()
        let release = DispatchSemaphore(value: 0)
        let first = Mutex(true)
        let writer = GroupCommitWriter<Int>(
            maximumBatchSize: 100, didEnqueue: { enqueued.record($0) }, retriesAlone: SQLiteJobStore.retriesAlone
        ) { (operations: [Int]) throws(QueuePersistence.PersistenceError) in
            // The first caller's commit waits until every other caller is queued behind it.
            if first.withLock({ isFirst in defer { isFirst = false }; return isFirst }) { release.wait() }
            do {
                try database.write { db in
                    for operation in operations { try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [operation]) }
                }
            } catch {
                throw SQLiteJobStore.translate(error, path: path, action: .write)
            }
        }
        let outcomes = EventCollector<Bool>()
        for operation in 1...8 {
            if operation == 2 { _ = await enqueued.values(count: 1) }
            Thread.detachNewThread {
                outcomes.record((try? writer.submit(operation)) != nil)
            }
        }
        _ = await enqueued.values(count: 8)
        release.signal()
        #expect(await outcomes.values(count: 8) == Array(repeating: false, count: 8), "every caller fails while the lock is held")
        #expect(writer.commits == 2, "the first caller's commit, then one for the seven queued behind it")
        unlock.signal()
        // The holder commits before the next submit: a write begun while it still held the lock
        // would hold a read lock that makes the holder's own commit fail (it has no busy timeout).
        #expect(await unlocked.values(count: 1) == [true])
        try writer.submit(9)
        #expect(try await database.read { db in try Int.fetchAll(db, sql: "SELECT x FROM t ORDER BY x") } == [0, 9])
    }

    /// A job nested deeper than a load accepts is refused by `persist`, not stored to be set
    /// aside as corrupt (never to run) by the next load.
    @Test func aJobNestedTooDeepToLoadIsRefusedByPersist() throws {
        let directory = try TemporaryDirectory()
        let persister = try SQLiteJobPersister(handling: TreeJob.self, queueName: "q", path: directory.file("deep.sqlite").path)
        try persister.persist([TreeJob(id: "shallow", depth: 100)])
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            try persister.persist([TreeJob(id: "deep", depth: 150)])
        }
        #expect(error?.code == .encodingFailed)
        #expect(try persister.load() == [TreeJob(id: "shallow", depth: 100)])
        #expect(persister.loadIssues.isEmpty)
    }

    @Test func sixteenThreadsPersistingAtOnceAllLandOnce() async throws {
        let directory = try TemporaryDirectory()
        let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: directory.file("g.sqlite").path)
        let before = persister.store.writer.commits
        let finished = EventCollector<Int>()
        for thread in 0..<16 {
            Thread.detachNewThread {
                for index in 0..<20 {
                    try? persister.persist([CuteJob(id: "\(thread)-\(index)")])
                }
                finished.record(thread)
            }
        }
        _ = await finished.values(count: 16)
        let loaded = try persister.load()
        #expect(loaded.count == 320)
        #expect(Set(loaded.map(\.id)).count == 320)
        #expect(persister.store.writer.commits - before >= 1)
    }

    /// Durable group commit: with 16 threads submitting at once, no call returns before the
    /// commit that holds its operation has finished, and every operation is committed once.
    @Test func everyCallerReturnsOnlyOnceItsOperationIsCommitted() async throws {
        let committed = Mutex<Set<Int>>([])
        let twice = Mutex<[Int]>([])
        // The first commit waits until every thread has queued an operation, so that the callers
        // must share the next commit (without the gate, 16 threads on 2 busy cores may happen to
        // take turns and never overlap).
        let queued = Atomic<Int>(0)
        let allQueued = DispatchSemaphore(value: 0)
        let firstCommit = Atomic<Bool>(true)
        let writer = GroupCommitWriter<Int>(maximumBatchSize: 1024, didEnqueue: { _ in
            if queued.add(1, ordering: .relaxed).newValue == 16 { allQueued.signal() }
        }) { operations in
            if firstCommit.exchange(false, ordering: .relaxed) { allQueued.wait() }
            committed.withLock { set in
                for operation in operations where !set.insert(operation).inserted {
                    twice.withLock { $0.append(operation) }
                }
            }
        }
        let early = EventCollector<Int>()
        let finished = EventCollector<Int>()
        for thread in 0..<16 {
            Thread.detachNewThread {
                for index in 0..<100 {
                    let operation = thread * 1_000 + index
                    try? writer.submit(operation)
                    if !committed.withLock({ $0.contains(operation) }) { early.record(operation) }
                }
                finished.record(thread)
            }
        }
        _ = await finished.values(count: 16)
        #expect(early.values.isEmpty)
        #expect(twice.withLock { $0 }.isEmpty)
        #expect(committed.withLock { $0.count } == 1_600)
        #expect(writer.commits < 1_600, "callers shared the commit after the gate")
    }

    /// The same on a real file: once `persist` returns, another connection reads the job.
    @Test func aPersistThatReturnedIsCommittedForOtherConnections() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("durable.sqlite").path
        let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
        let reader = try DatabaseQueue(path: path)
        let missing = EventCollector<String>()
        let finished = EventCollector<Int>()
        for thread in 0..<16 {
            Thread.detachNewThread {
                for index in 0..<10 {
                    let id = "\(thread)-\(index)"
                    do {
                        try persister.persist([CuteJob(id: id)])
                        let stored = try reader.read { db in
                            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM queuePersistenceJob WHERE jobID = ?", arguments: [id])
                        }
                        if stored != 1 { missing.record(id) }
                    } catch {
                        missing.record("\(id): \(error)")
                    }
                }
                finished.record(thread)
            }
        }
        _ = await finished.values(count: 16)
        #expect(missing.values.isEmpty)
    }
    // MARK: - persistFirst

    /// The rows' `sequence` numbers of `queue`, in load order.
    private static func sequences(_ persister: SQLiteJobPersister<CuteJob>, _ queue: String) throws -> [Int64] {
        try persister.store.pool.read { db in
            try Int64.fetchAll(db, sql: "SELECT sequence FROM queuePersistenceJob WHERE queueName = ? ORDER BY sequence", arguments: [queue])
        }
    }

    /// `sequence` is one column for every queue of the file: a job stored first goes below the
    /// lowest row of the whole file, so it never takes another queue's number.
    @Test func jobsStoredFirstGoBelowEveryRowOfTheFileNotJustTheirQueues() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("shared.sqlite").path
        let first = try SQLiteJobPersister(handling: CuteJob.self, queueName: "first", path: path)
        let second = try SQLiteJobPersister(handling: CuteJob.self, queueName: "second", path: path)
        try second.persist([CuteJob(id: "s1")])
        try first.persist([CuteJob(id: "f1"), CuteJob(id: "f2")])
        try second.persistFirst([CuteJob(id: "s0")])
        try first.persistFirst([CuteJob(id: "f0")])
        #expect(try Self.sequences(second, "second") == [0, 1])
        #expect(try Self.sequences(first, "first") == [-1, 2, 3])
        #expect(try first.load().map(\.id) == ["f0", "f1", "f2"])
        #expect(try second.load().map(\.id) == ["s0", "s1"])
    }

    /// A batch that fails half-way (a trigger refuses its first job, which is inserted last)
    /// is rolled back: the jobs inserted before it are gone again and a moved job is back in
    /// its old place with its old value.
    @Test func aPersistFirstThatFailsHalfWayIsRolledBackWhole() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("rollback.sqlite").path
        let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
        try persister.persist([CuteJob(id: "a"), CuteJob(id: "b", action: "old")])
        try persister.store.pool.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER refusePoison BEFORE INSERT ON queuePersistenceJob
                    WHEN NEW.jobID = 'poison' BEGIN SELECT RAISE(ABORT, 'poison refused'); END
                    """
            )
        }
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            try persister.persistFirst([CuteJob(id: "poison"), CuteJob(id: "b", action: "moved"), CuteJob(id: "new")])
        }
        #expect(error?.code == .writeFailed)
        #expect(try persister.load().map(\.id) == ["a", "b"])
        #expect(try persister.load().last?.action == "old")
        #expect(try Self.sequences(persister, "q") == [1, 2])

        try persister.persistFirst([CuteJob(id: "b", action: "moved"), CuteJob(id: "new")])
        #expect(try persister.load().map(\.id) == ["b", "new", "a"])
        #expect(try persister.load().first?.action == "moved")
    }

    /// A load reads more than one page of rows; a job that `persistFirst` moves below the rows
    /// already read while it does must not be missed (every such load missed jobs when each
    /// page was its own read; now every page comes from one snapshot).
    @Test func aLoadOfManyPagesWhileJobsAreMovedToTheFrontSeesEveryJobOnce() async throws {
        let directory = try TemporaryDirectory()
        let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: directory.file("pages.sqlite").path)
        let count = SQLiteJobPersister<CuteJob>.pageSize + 2_000
        let jobs = (0..<count).map { CuteJob(id: "j\($0)") }
        try persister.persist(jobs)
        let loadsDone = Atomic(false)
        let firstMove = EventCollector<Bool>()
        let moverDone = EventCollector<Bool>()
        Thread.detachNewThread {
            // Moves jobs from the last page to the front until the loads are done.
            var index = count - 1
            var first = true
            while !loadsDone.load(ordering: .acquiring) {
                let stored = (try? persister.persistFirst([jobs[index]])) != nil
                if first { firstMove.record(stored) }
                first = false
                index = index == count - 2_000 ? count - 1 : index - 1
            }
            moverDone.record(true)
        }
        #expect(await firstMove.values(count: 1) == [true])
        var bad: [String] = []
        for _ in 0..<5 {
            let ids = try persister.load().map(\.id)
            if ids.count != count || Set(ids).count != count { bad.append("\(ids.count) jobs, \(Set(ids).count) distinct") }
        }
        loadsDone.store(true, ordering: .releasing)
        _ = await moverDone.values(count: 1)
        #expect(bad.isEmpty)
        #expect(Set(try persister.load().map(\.id)) == Set(jobs.map(\.id)))
    }

    /// A real lock held by another connection: `persistFirst` waits out its busy timeout,
    /// throws, and changes nothing; once the lock is released it works.
    @Test func aPersistFirstBlockedByAnotherConnectionsLockThrowsAndChangesNothing() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("locked.sqlite").path
        let persister = try SQLiteJobPersister(
            handling: CuteJob.self,
            queueName: "q",
            path: path,
            configuration: .init(busyTimeout: .milliseconds(100))
        )
        try persister.persist([CuteJob(id: "a"), CuteJob(id: "b")])
        let other = try DatabaseQueue(path: path)
        let locked = EventCollector<Bool>()
        let release = DispatchSemaphore(value: 0)
        let done = EventCollector<Bool>()
        Thread.detachNewThread {
            do {
                try other.write { db in
                    try db.execute(sql: "CREATE TABLE holdTheLock (x)")
                    locked.record(true)
                    release.wait()
                    return
                }
                done.record(true)
            } catch {
                locked.record(false)
                done.record(false)
            }
        }
        #expect(await locked.values(count: 1) == [true])
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            try persister.persistFirst([CuteJob(id: "r"), CuteJob(id: "b", action: "moved")])
        }
        release.signal()
        #expect(await done.values(count: 1) == [true])
        #expect(error?.code == .writeFailed)
        #expect(try persister.load().map(\.id) == ["a", "b"])
        #expect(try persister.load().last?.action == "")

        try persister.persistFirst([CuteJob(id: "r"), CuteJob(id: "b", action: "moved")])
        #expect(try persister.load().map(\.id) == ["r", "b", "a"])
    }
}

/// A job holding a value nested `depth` levels deep (each level two in the binary format: an
/// enum case is a keyed container holding another).
private struct TreeJob: QueueJob, Equatable {
    indirect enum Tree: Codable, Equatable, Sendable {
        case leaf
        case node(Tree)
    }

    var id: String
    var createdDate = Date(timeIntervalSince1970: 1_000)
    var data: Data?
    var action = "tree"
    var tree: Tree

    init(id: String, depth: Int) {
        self.id = id
        tree = (0..<depth).reduce(Tree.leaf) { tree, _ in .node(tree) }
    }
}
