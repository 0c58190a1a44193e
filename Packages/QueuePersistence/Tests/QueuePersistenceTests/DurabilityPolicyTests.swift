import AsyncPrimitivesTesting
import Dispatch
import Foundation
import GRDB
@testable import QueuePersistence
import QueueCore
import QueueCoreTesting
import Synchronization
import Testing

/// `CuteJob` after a release that added a non-optional field: intact stored jobs no longer decode.
private struct StricterJob: QueueJob, Equatable {
    var id: String
    var createdDate: Date
    var data: Data?
    var action: String
    var priority: Int
}

/// A job whose `init(from:)` calls `ReentrantJob.hook`, as a user's decoder might call the
/// persister that is loading it.
private struct ReentrantJob: QueueJob {
    static let hook = Mutex<(@Sendable () -> Void)?>(nil)

    var id: String
    var createdDate: Date
    var data: Data?
    var action: String

    private enum CodingKeys: String, CodingKey { case id, createdDate, data, action }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        createdDate = try container.decode(Date.self, forKey: .createdDate)
        data = try container.decodeIfPresent(Data.self, forKey: .data)
        action = try container.decode(String.self, forKey: .action)
        Self.hook.withLock { $0 }?()
    }
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct DurabilityPolicyTests {
    // MARK: - Acknowledged means stored

    @Test func enqueueOnAFolderThatStopsBeingWritableThrowsAndQueuesNothing() async throws {
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "uploads", directory: directory.url)
        let queue = try JobQueue(handling: CuteJob.self, name: "uploads", persister: persister)
        let first = CuteJob(id: "first")
        try await queue.enqueue([first])
        // The folder turns into a plain file: not even root can create a file inside it.
        let folder = try #require(persister.directory)
        try FileManager.default.removeItem(at: folder)
        try Data("not a folder any more".utf8).write(to: folder)

        let error = #expect(throws: QueueError.self) { try queue.enqueue([CuteJob(id: "second")]) }
        #expect(error?.code == .persistenceFailed)
        #expect((error?.underlying as? QueuePersistence.PersistenceError)?.code == .writeFailed)
        let asyncError = await #expect(throws: QueueError.self) { try await queue.enqueue([CuteJob(id: "third")]) }
        #expect(asyncError?.code == .persistenceFailed)
        #expect(queue.count == 1)
        #expect(queue.peek() == first)
        // `add` keeps the seed's shape: it queues what it could not store, and says so.
        queue.add([CuteJob(id: "fourth")])
        #expect(queue.count == 2)
        #expect(queue.lastPersistenceError != nil)
    }

    @Test func aBatchThatFailsHalfwayStoresNoneOfItsJobs() throws {
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "batch", directory: directory.url)
        let queue = try JobQueue(handling: CuteJob.self, name: "batch", persister: persister)
        let folder = try #require(persister.directory)
        // A directory where the second job's temporary file must go: its write fails with
        // EISDIR (for root too) after the first job's file was written. A new folder numbers its
        // jobs from 10^19 (the numbers below are for jobs stored first).
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent(".tmp-10000000000000000001-b.job"),
            withIntermediateDirectories: false
        )
        let error = #expect(throws: QueueError.self) { try queue.enqueue([CuteJob(id: "a"), CuteJob(id: "b")]) }
        #expect((error?.underlying as? QueuePersistence.PersistenceError)?.jobID == "b")
        #expect(queue.count == 0)
        #expect(try FileBasedPersister(handling: CuteJob.self, queueName: "batch", directory: directory.url).load() == [])
        #expect(filesBelow(folder).filter { $0.hasSuffix(".job") && !$0.hasPrefix(".tmp-") }.isEmpty)
    }

    // MARK: - One load policy for both persisters

    @Test func anIntactJobTheTypeNoLongerDecodesStaysInPlaceIsReportedAndLoadsAgainLater() throws {
        let directory = try TemporaryDirectory()
        let jobs = [CuteJob(id: "a", action: "x"), CuteJob(id: "b", action: "y")]
        try FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url).persist(jobs)
        let before = filesBelow(directory.url)

        let strict = FileBasedPersister(handling: StricterJob.self, queueName: "q", directory: directory.url)
        #expect(try strict.load() == [])
        #expect(strict.loadIssues.map(\.code) == [.undecodableJob, .undecodableJob])
        #expect(strict.loadIssues.map(\.jobID) == ["a", "b"])
        #expect(strict.loadIssues.allSatisfy { $0.underlying is DecodingError })
        #expect(filesBelow(directory.url) == before) // untouched: nothing moved to corrupt/

        let fixed = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        #expect(try fixed.load() == jobs)
        #expect(fixed.loadIssues.isEmpty)
    }

    @Test func aJobFileThatCannotBeReadFailsTheLoadWithATypedErrorAndMovesNothing() throws {
        let directory = try TemporaryDirectory()
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        try persister.persist([CuteJob(id: "a"), CuteJob(id: "b")])
        let folder = try #require(persister.directory)
        // A real read error, also for root: the second job's file is now a directory (EISDIR).
        let victim = try #require(filesBelow(folder).sorted().last)
        try FileManager.default.removeItem(at: folder.appendingPathComponent(victim))
        try FileManager.default.createDirectory(at: folder.appendingPathComponent(victim), withIntermediateDirectories: false)

        let error = #expect(throws: QueuePersistence.PersistenceError.self) { try persister.load() }
        #expect(error?.code == .readFailed)
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("corrupt").path))
        #expect(filesBelow(folder).count == 1) // "a" is still there, and nothing was moved
    }

    @Test func sqliteKeepsAnUndecodableRowUntouchedAndLoadsItOnceTheTypeDecodesIt() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("jobs.sqlite").path
        let jobs = [CuteJob(id: "a", action: "x"), CuteJob(id: "b", action: "y")]
        try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path).persist(jobs)

        let strict = try SQLiteJobPersister(handling: StricterJob.self, queueName: "q", path: path)
        #expect(try strict.load() == [])
        #expect(strict.loadIssues.map(\.code) == [.undecodableJob, .undecodableJob])
        #expect(strict.loadIssues.map(\.jobID) == ["a", "b"])
        let fixed = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
        #expect(try fixed.load() == jobs)
        #expect(fixed.loadIssues.isEmpty)
    }

    // MARK: - No user code under a lock

    @Test func aJobsInitFromMayCallTheFilePersisterThatIsLoadingIt() throws {
        let directory = try TemporaryDirectory()
        let writer = FileBasedPersister(handling: CuteJob.self, queueName: "q", directory: directory.url)
        try writer.persist([CuteJob(id: "stored", action: "x")])
        let loader = FileBasedPersister(handling: ReentrantJob.self, queueName: "q", directory: directory.url)
        // From another thread, with a deadline, so that a persister still holding its lock
        // fails this test instead of hanging it.
        let finished = EventCollector<Void>()
        ReentrantJob.hook.withLock { hook in
            hook = {
                let done = DispatchSemaphore(value: 0)
                DispatchQueue.global().async {
                    try? writer.persist([CuteJob(id: "from-init", action: "y")])
                    finished.record(())
                    done.signal()
                }
                _ = done.wait(timeout: .now() + 5)
            }
        }
        defer { ReentrantJob.hook.withLock { $0 = nil } }
        #expect(try loader.load().map(\.id) == ["stored"])
        #expect(finished.count == 1)
        ReentrantJob.hook.withLock { $0 = nil }
        #expect(try writer.load().map(\.id) == ["stored", "from-init"])
    }

    @Test func aJobsInitFromMayCallTheSQLitePersisterThatIsLoadingIt() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("jobs.sqlite").path
        let writer = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
        try writer.persist([CuteJob(id: "stored", action: "x")])
        let loader = try SQLiteJobPersister(handling: ReentrantJob.self, queueName: "q", path: path)
        // On the same thread: GRDB refuses (traps) a write inside a read of the same pool.
        let reentered = EventCollector<Void>()
        ReentrantJob.hook.withLock { hook in
            hook = {
                if (try? writer.persist([CuteJob(id: "from-init", action: "y")])) != nil {
                    reentered.record(())
                }
            }
        }
        defer { ReentrantJob.hook.withLock { $0 = nil } }
        #expect(try loader.load().map(\.id) == ["stored"])
        #expect(reentered.count == 1)
        ReentrantJob.hook.withLock { $0 = nil }
        #expect(try writer.load().map(\.id) == ["stored", "from-init"])
    }

    // MARK: - Nesting depth

    @Test func aCraftedRowNestedAMillionLevelsDeepIsCorruptNotAStackOverflow() throws {
        var bytes: [UInt8] = [BinaryJobCoder.formatByte]
        for _ in 0..<1_000_000 { bytes += [BinaryJobCoder.Tag.array.rawValue, 1] }
        bytes.append(BinaryJobCoder.Tag.null.rawValue)
        #expect(throws: DecodingError.self) { try BinaryJobCoder.decode(CuteJob.self, from: bytes) }

        // The same row in a database: set aside as corrupt, every other job loads.
        let directory = try TemporaryDirectory()
        let path = directory.file("deep.sqlite").path
        let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "q", path: path)
        let jobs = [CuteJob(id: "a"), CuteJob(id: "deep"), CuteJob(id: "c")]
        try persister.persist(jobs)
        try persister.store.pool.write { db in
            try db.execute(sql: "UPDATE queuePersistenceJob SET payload = ? WHERE jobID = 'deep'", arguments: [Data(bytes)])
        }
        #expect(try persister.load() == [jobs[0], jobs[2]])
        #expect(persister.loadIssues.map(\.code) == [.corruptJob])
        #expect(persister.loadIssues.first?.jobID == "deep")
        let quarantined = try persister.store.pool.read {
            try String.fetchAll($0, sql: "SELECT jobID FROM queuePersistenceQuarantine")
        }
        #expect(quarantined == ["deep"])
    }

    @Test func nestingUpToTheLimitStillDecodes() throws {
        var bytes: [UInt8] = [BinaryJobCoder.formatByte]
        for _ in 0..<(BinaryJobCoder.maximumDepth - 1) { bytes += [BinaryJobCoder.Tag.array.rawValue, 1] }
        bytes.append(BinaryJobCoder.Tag.null.rawValue)
        try BinaryJobCoder.validate(bytes)
        bytes.insert(contentsOf: [BinaryJobCoder.Tag.array.rawValue, 1], at: 1)
        #expect(throws: DecodingError.self) { try BinaryJobCoder.validate(bytes) }
    }
}
