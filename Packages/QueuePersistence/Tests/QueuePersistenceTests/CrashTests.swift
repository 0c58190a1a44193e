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
