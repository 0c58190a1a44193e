import Foundation
import QueueCore
import QueuePersistence
import Testing
import QueueCoreTesting

/// The job the crash helper writes (same fields, same JSON).
private struct CrashJob: QueueJob, Equatable {
    var id: String
    var createdDate: Date
    var data: Data?
    var action: String
}

// Five minutes: 100 kills per store take about 20 s on 2 cores, longer under AddressSanitizer.
@Suite(.timeLimit(.minutes(5)))
struct CrashTests {
    private static func open(_ backend: String, _ location: String) throws -> any JobPersister<CrashJob> {
        if backend == "sqlite" {
            return try SQLiteJobPersister(handling: CrashJob.self, queueName: "crash", path: location)
        }
        return FileBasedPersister(handling: CrashJob.self, queueName: "crash", directory: URL(fileURLWithPath: location))
    }

    private static func isDeletedByHelper(_ id: String) -> Bool {
        guard let index = id.split(separator: "-").last.flatMap({ Int($0) }) else { return false }
        return index % 3 == 0
    }

    /// A real write fault, not a mock: the helper process lowers its own file-size limit
    /// (RLIMIT_FSIZE) to one byte, so that every write fails with EFBIG as on a full disk, and
    /// raises it again. Each `persist` during the fault throws `writeFailed`; every job
    /// acknowledged before and after it is stored intact and in order, none that failed
    /// appears, no temporary file is left behind, and the persister works again by itself.
    /// A `persistFirst` of a stored job during the fault throws too and leaves the job as and
    /// where it was; after the fault, `persistFirst` moves a stored job and puts a new one first.
    ///
    /// The same steps run with the file persister's queue folder made read-only (0555) instead
    /// (`read-only-fault`; the helper runs as nobody, since root ignores file modes).
    @Test(arguments: [("file-size-fault", "file"), ("file-size-fault", "sqlite"), ("read-only-fault", "file")])
    func aFullDiskOrAReadOnlyFolderFailsEachWriteWithATypedErrorAndLosesNothing(_ fault: String, _ backend: String) async throws {
        let directory = try TemporaryDirectory()
        let location = backend == "sqlite" ? directory.file("fault.sqlite").path : directory.path
        let (lines, status) = try await CrashHelperProcess.runFault(fault, backend: backend, location: location, tag: "f")
        #expect(status == 0, "the helper exited with \(status): \(lines.suffix(3))")
        #expect(lines.last == "DONE")
        let acknowledged = lines.filter { $0.hasPrefix("P ") }.map { String($0.dropFirst(2)) }
        let failed = lines.filter { $0.hasPrefix("E ") }
        #expect(acknowledged == (0..<20).map { "f-\($0)" } + (40..<60).map { "f-\($0)" }, "stored before and after the fault")
        #expect(failed.count == 21, "every persist and the persistFirst during the fault failed")
        #expect(failed.contains { $0.hasPrefix("E f-5 ") }, "the persistFirst during the fault failed")
        #expect(lines.filter { $0.hasPrefix("F ") } == ["F f-7", "F f-60"], "stored first after the fault")
        for line in failed {
            #expect(line.contains("writeFailed"), "a typed error: \(line)")
        }

        // A completion (a delete) during the fault: it succeeds (a file is unlinked without a
        // write) or throws and the job stays; after the fault, deletes work again.
        let deletedDuringFault = lines.contains("D f-0")
        #expect(deletedDuringFault || lines.contains { $0.hasPrefix("X f-0 ") && $0.contains("deleteFailed") }, "\(lines)")
        // A read-only folder refuses the unlink too.
        #expect(fault != "read-only-fault" || !deletedDuringFault, "\(lines)")
        #expect(lines.contains("D f-1"))
        let stored = ["f-60", "f-7"]
            + acknowledged.filter { $0 != "f-1" && $0 != "f-7" && ($0 != "f-0" || !deletedDuringFault) }

        let loaded = try Self.open(backend, location).load()
        #expect(loaded.map(\.id) == stored, "every acknowledged job, in order, and no other")
        #expect(loaded.filter { $0.action == "first" }.map(\.id) == ["f-60", "f-7"], "f-5 kept its value")
        for job in loaded {
            #expect(job.data == Data(String(repeating: job.id + ";", count: 8).utf8), "\(job.id) damaged")
        }
        if backend == "file" {
            let leftovers = filesBelow(directory.url).filter { $0.contains(".tmp-") }
            #expect(leftovers.isEmpty, "temporary files left by the failed writes: \(leftovers)")
        }
    }

    /// The SQLite database made read-only mid-run, as a user other than root (the helper runs as
    /// nobody when started as root, which ignores file modes), in two rounds: the database file
    /// alone (0444), then the file and its folder (0555). What SQLite does, measured: a persister
    /// that has the file open keeps writing through its open descriptors, so every `persist`,
    /// `persistFirst` and `delete` during the fault succeeds, and each is stored; a persister
    /// opened during the fault (a restart) is refused with `.storageUnavailable` saying the file is
    /// read-only (SQLite would open it read-only: a persister that fails every write for its whole
    /// life, and whose first read leaves `-wal` and `-shm` files as read-only as the database,
    /// which keep it unwritable after the fault); once the file is writable, a persister opens and
    /// works. Nothing acknowledged is lost, the order holds, no job appears that was not stored.
    /// (A read-only remount is no mid-run fault: Linux refuses it, EBUSY, while a file on the
    /// mount is open for writing, as SQLite's database is.)
    @Test func aSQLiteDatabaseMadeReadOnlyKeepsItsOpenPersisterWritingAndRefusesAReopenWithATypedError() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("fault.sqlite").path
        let (lines, status) = try await CrashHelperProcess.runFault("read-only-fault", backend: "sqlite", location: path, tag: "f")
        #expect(status == 0, "the helper exited with \(status): \(lines.suffix(3))")
        #expect(lines.last == "DONE")
        let ids = { (prefix: String) in lines.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) } }
        let acknowledged = ids("P ")
        // The persister opened before each round kept writing: no write failed.
        #expect(lines.filter { $0.hasPrefix("E ") || $0.hasPrefix("X ") }.isEmpty, "\(lines)")
        #expect(acknowledged == (0..<25).map { "f-\($0)" } + (27..<35).map { "f-\($0)" } + (37..<60).map { "f-\($0)" })
        #expect(ids("F ") == ["f-5", "f-9", "f-7", "f-60"])
        #expect(ids("D ") == ["f-0", "f-1", "f-2"])
        // Each restart during the fault: refused with a typed error that says why; each open
        // once the fault is gone: works (the stores after it are acknowledged above).
        let opens = lines.drop { $0 != "READY" }.filter { $0 == "O" || $0.hasPrefix("N ") }
        #expect(opens.count == 4, "\(opens)")
        for (index, open) in opens.enumerated() {
            if index.isMultiple(of: 2) {
                #expect(open.hasPrefix("N storageUnavailable") && open.contains("read-only"), "a restart during the fault: \(open)")
            } else {
                #expect(open == "O", "an open once the fault is gone: \(open)")
            }
        }

        let stored = ["f-60", "f-7", "f-9", "f-5"]
            + acknowledged.filter { !["f-0", "f-1", "f-2", "f-5", "f-7", "f-9"].contains($0) }
        let loaded = try Self.open("sqlite", path).load()
        #expect(loaded.map(\.id) == stored, "every acknowledged job, in order, and no other")
        #expect(loaded.filter { $0.action == "first" }.map(\.id) == ["f-60", "f-7", "f-9", "f-5"])
        for job in loaded {
            #expect(job.data == Data(String(repeating: job.id + ";", count: 8).utf8), "\(job.id) damaged")
        }
        // No file of the database is left read-only to its owner.
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: directory.file(name).path)[.posixPermissions] as? Int)
            #expect(mode & 0o200 != 0, "\(name) is left with mode \(String(mode, radix: 8))")
        }
    }

    /// Another process holds SQLite's write lock past the busy timeout: each write throws a
    /// typed error and stores nothing, reads go on, nothing acknowledged is lost, and writes work
    /// again by themselves once the lock is released.
    @Test func anotherProcessHoldingTheWriteLockFailsWritesWithATypedErrorAndLosesNothing() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("locked.sqlite").path
        let persister = try SQLiteJobPersister(
            handling: CrashJob.self, queueName: "locked", path: path,
            configuration: .init(busyTimeout: .milliseconds(50))
        )
        func job(_ id: String) -> CrashJob {
            CrashJob(id: id, createdDate: Date(timeIntervalSinceReferenceDate: 0), data: Data(id.utf8), action: "locked")
        }
        try persister.persist((0..<5).map { job("a\($0)") })
        var holder = try await CrashHelperProcess.holdWriteLock(on: path)

        let persistError = #expect(throws: PersistenceError.self) { try persister.persist([job("b0")]) }
        #expect(persistError?.code == .writeFailed, "\(String(describing: persistError))")
        let deleteError = #expect(throws: PersistenceError.self) { try persister.delete(job("a0")) }
        #expect(deleteError?.code == .deleteFailed, "\(String(describing: deleteError))")
        // Readers are not held up by a writer (WAL): a restart during the lock loads every job.
        #expect(try persister.load().map(\.id) == ["a0", "a1", "a2", "a3", "a4"])

        let released = await holder.release()
        #expect(released.line == "released")
        #expect(released.status == 0)
        try persister.persist([job("b1")])
        try persister.delete(job("a0"))
        let reopened = try SQLiteJobPersister(handling: CrashJob.self, queueName: "locked", path: path)
        #expect(try reopened.load().map(\.id) == ["a1", "a2", "a3", "a4", "b1"], "nothing lost, nothing failed stored")
    }

    /// 100 SIGKILLs per store at random moments of a helper adding and deleting jobs from several
    /// threads; after each, the store is opened and checked. Prints the counts
    /// (`crash test (sqlite): 100 kills, … lost 0, …`), all of which must be 0.
    @Test(arguments: ["file", "sqlite"])
    func everyAcknowledgedJobSurvivesSIGKILLExactlyOnce(_ backend: String) async throws {
        let directory = try TemporaryDirectory()
        let location = backend == "sqlite" ? directory.file("crash.sqlite").path : directory.path
        var alive = Set<String>()
        var everDeleted = Set<String>()
        var acknowledged = 0
        var counts = (lost: 0, duplicated: 0, reordered: 0, undeleted: 0, damaged: 0, torn: 0)
        var generator = SystemRandomNumberGenerator()
        let kills = 100
        for run in 0..<kills {
            let (outcome, status) = try await CrashHelperProcess.runAndKill(
                backend: backend,
                location: location,
                tag: "r\(run)",
                threads: backend == "sqlite" ? 4 : 2,
                acknowledgements: Int.random(in: 1...40, using: &generator)
            )
            #expect(status == SIGKILL, "run \(run): the helper exited with \(status) instead of being killed")
            #expect(!outcome.persisted.isEmpty)
            acknowledged += outcome.persisted.count
            // The helper deletes every third job right after persisting it: a job whose delete
            // was not acknowledged may or may not be gone; every other acknowledged job must stay.
            alive.formUnion(outcome.persisted.filter { !Self.isDeletedByHelper($0) })
            everDeleted.formUnion(outcome.deleted)

            // The store still opens, and holds every acknowledged job, intact, once.
            let loaded = try Self.open(backend, location).load()
            let ids = loaded.map(\.id)
            counts.duplicated += ids.count - Set(ids).count
            let missing = alive.subtracting(ids)
            counts.lost += missing.count
            #expect(missing.isEmpty, "run \(run): acknowledged jobs lost: \(missing.sorted())")
            alive.subtract(missing)
            let resurrected = everDeleted.intersection(ids)
            counts.undeleted += resurrected.count
            #expect(resurrected.isEmpty, "run \(run): acknowledged deletes undone: \(resurrected.sorted())")
            counts.damaged += loaded.filter { $0.data != Data(String(repeating: $0.id + ";", count: 8).utf8) || $0.action != "crash" }.count
            // Each producer thread's jobs load in the order it added them.
            var lastIndex: [String: Int] = [:]
            for id in ids {
                let parts = id.split(separator: "-")
                guard parts.count == 3, let index = Int(parts[2]) else {
                    Issue.record("unexpected id \(id)")
                    continue
                }
                let producer = "\(parts[0])-\(parts[1])"
                if index <= lastIndex[producer, default: -1] { counts.reordered += 1 }
                lastIndex[producer] = index
            }
            if backend == "file", FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("crash/corrupt").path) {
                counts.torn += 1
            }
        }
        print("crash test (\(backend)): \(kills) kills, \(acknowledged) jobs acknowledged, \(alive.count) stored at the end; lost \(counts.lost), duplicated \(counts.duplicated), reordered \(counts.reordered), deletes undone \(counts.undeleted), damaged \(counts.damaged), torn files \(counts.torn)")
        #expect(counts.lost == 0 && counts.duplicated == 0 && counts.reordered == 0, "\(counts)")
        #expect(counts.undeleted == 0 && counts.damaged == 0 && counts.torn == 0, "\(counts)")
    }
}
