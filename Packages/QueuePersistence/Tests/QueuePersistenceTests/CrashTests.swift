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

@Suite(.timeLimit(.minutes(2)))
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
    @Test(arguments: ["file", "sqlite"])
    func aFullDiskFailsEachPersistWithATypedErrorAndLosesNothing(_ backend: String) async throws {
        let directory = try TemporaryDirectory()
        let location = backend == "sqlite" ? directory.file("fault.sqlite").path : directory.path
        let (lines, status) = try await CrashHelperProcess.runFileSizeFault(backend: backend, location: location, tag: "f")
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
        #expect(deletedDuringFault || lines.contains { $0.hasPrefix("X f-0 ") && $0.contains("writeFailed") }, "\(lines)")
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

    @Test(arguments: ["file", "sqlite"])
    func everyAcknowledgedJobSurvivesSIGKILLExactlyOnce(_ backend: String) async throws {
        let directory = try TemporaryDirectory()
        let location = backend == "sqlite" ? directory.file("crash.sqlite").path : directory.path
        var alive = Set<String>()
        var everDeleted = Set<String>()
        var generator = SystemRandomNumberGenerator()
        for run in 0..<20 {
            let (outcome, status) = try await CrashHelperProcess.runAndKill(
                backend: backend,
                location: location,
                tag: "r\(run)",
                threads: backend == "sqlite" ? 4 : 2,
                acknowledgements: Int.random(in: 1...40, using: &generator)
            )
            #expect(status == SIGKILL, "run \(run): the helper exited with \(status) instead of being killed")
            #expect(!outcome.persisted.isEmpty)
            // The helper deletes every third job right after persisting it: a job whose delete
            // was not acknowledged may or may not be gone; every other acknowledged job must stay.
            alive.formUnion(outcome.persisted.filter { !Self.isDeletedByHelper($0) })
            everDeleted.formUnion(outcome.deleted)

            // The store still opens, and holds every acknowledged job, intact, once.
            let loaded = try Self.open(backend, location).load()
            let ids = loaded.map(\.id)
            #expect(Set(ids).count == ids.count, "run \(run): a job loaded twice")
            let missing = alive.subtracting(ids)
            #expect(missing.isEmpty, "run \(run): acknowledged jobs lost: \(missing.sorted())")
            let resurrected = everDeleted.intersection(ids)
            #expect(resurrected.isEmpty, "run \(run): acknowledged deletes undone: \(resurrected.sorted())")
            for job in loaded {
                #expect(job.data == Data(String(repeating: job.id + ";", count: 8).utf8), "run \(run): \(job.id) damaged")
                #expect(job.action == "crash")
            }
            // Each producer thread's jobs load in the order it added them.
            var lastIndex: [String: Int] = [:]
            for id in ids {
                let parts = id.split(separator: "-")
                guard parts.count == 3, let index = Int(parts[2]) else {
                    Issue.record("unexpected id \(id)")
                    continue
                }
                let producer = "\(parts[0])-\(parts[1])"
                #expect(index > lastIndex[producer, default: -1], "run \(run): \(id) out of order")
                lastIndex[producer] = index
            }
            if backend == "file" {
                let corrupt = directory.url.appendingPathComponent("crash/corrupt")
                #expect(!FileManager.default.fileExists(atPath: corrupt.path), "run \(run): a file was torn")
            }
        }
    }
}
