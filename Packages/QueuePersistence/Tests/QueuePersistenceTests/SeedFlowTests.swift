import Foundation
import QueueCore
import QueuePersistence
import Testing
import QueueCoreTesting

/// The seed's "Persisting QueueJobs" flows, written as the seed shows them.
@Suite(.timeLimit(.minutes(1)))
struct SeedFlowTests {
    private static func persister(_ backend: String, _ name: String, _ directory: TemporaryDirectory) throws -> any JobPersister<CuteJob> {
        if backend == "sqlite" {
            return try SQLiteJobPersister(handling: CuteJob.self, queueName: name, path: directory.file("jobs.sqlite").path)
        }
        return FileBasedPersister(handling: CuteJob.self, queueName: name, directory: directory.url)
    }

    @Test func seedsDefaultPersisterAssignedToAQueueStoresAddedJobsAndDeletesRemovedOnes() throws {
        let name = "Observation Upload Queue \(UUID().uuidString)"
        let observationUploadQueue = JobQueue(handling: CuteJob.self, name: name)
        let persister = FileBasedPersister(handling: CuteJob.self, queueName: name)
        defer { persister.directory.map { try? FileManager.default.removeItem(at: $0) } }

        // Note: We need to type-erase using `AnyJobPersister` (the seed's comment).
        observationUploadQueue.persister = AnyJobPersister(persister)

        let jobs = [CuteJob(data: Data("o1".utf8), action: "create"), CuteJob(data: Data("o2".utf8), action: "update")]
        observationUploadQueue.add(jobs)
        #expect(try FileBasedPersister(handling: CuteJob.self, queueName: name).load() == jobs)
        #expect(observationUploadQueue.remove() == jobs[0])
        #expect(try FileBasedPersister(handling: CuteJob.self, queueName: name).load() == [jobs[1]])
        #expect(observationUploadQueue.cancel(id: jobs[1].id) == jobs[1])
        #expect(try persister.load().isEmpty)
    }

    @Test(arguments: ["file", "sqlite"])
    func aQueueCreatedWithAPersisterStartsWithTheStoredJobsInOrder(_ backend: String) throws {
        let directory = try TemporaryDirectory()
        let name = "Observation Upload Queue"
        let date = Date(timeIntervalSinceReferenceDate: 800_000_000)
        let jobs = (0..<5).map { CuteJob(id: "job-\(4 - $0)", createdDate: date, action: "create") }
        do {
            // A first run adds jobs and is stopped before processing them.
            let queue = JobQueue(handling: CuteJob.self, name: name)
            queue.persister = AnyJobPersister(try Self.persister(backend, name, directory))
            queue.add(jobs)
        }
        let persister = try Self.persister(backend, name, directory)
        let observationUploadQueue = try JobQueue(handling: CuteJob.self, name: name, persister: persister)
        #expect(observationUploadQueue.count == jobs.count)
        #expect(observationUploadQueue.peek() == jobs[0])
        #expect(observationUploadQueue.drain() == jobs)
        #expect(try Self.persister(backend, name, directory).load().isEmpty)
    }
}
