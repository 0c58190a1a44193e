import AsyncPrimitivesTesting
import Foundation
import QueueCore
import QueueRetry
import Synchronization
import Testing

/// A `JobQueue` with a `MaxRetryStrategy` processing real jobs: each job writes a file.
@Suite(.timeLimit(.minutes(1)))
struct JobQueueMaxRetryTests {
    @Test func flakyJobsAreRetriedAtTheFrontAndHopelessOnesArePurgedAfterMaxAttempts() async throws {
        let folder = try TemporaryDirectory()
        let queue = JobQueue(handling: UploadJob.self, name: "Photo Uploads")
        queue.retryStrategy = MaxRetryStrategy(maxAttempts: 3)
        // "b" fails twice then succeeds; "c" always fails.
        let failuresBeforeSuccess = ["b": 2, "c": Int.max]
        let tries = Mutex<[String: Int]>([:])
        let attempts = EventCollector<String>()
        queue.processor = AnyJobProcessor { job in
            attempts.record(job.id)
            let attempt = tries.withLock { tries -> Int in
                tries[job.id, default: 0] += 1
                return tries[job.id]!
            }
            if attempt <= failuresBeforeSuccess[job.id, default: 0] {
                throw SimulatedFailure(jobID: job.id)
            }
            try job.data!.write(to: folder.url.appendingPathComponent("\(job.id).txt"))
        }
        let processed = EventCollector<String>()
        let failed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            switch event {
            case .processed: jobs.forEach { processed.record($0.id) }
            case .failedToProcess: jobs.forEach { failed.record($0.id) }
            case .added, .removed, .cancelled: break
            }
        }

        queue.add(["a", "b", "c", "d"].map { UploadJob(id: $0, body: "photo \($0)") })
        queue.start()

        #expect(await processed.values(count: 3) == ["a", "b", "d"])
        #expect(await failed.values(count: 5) == ["b", "b", "c", "c", "c"])
        #expect(await attempts.values(count: 8) == ["a", "b", "b", "b", "c", "c", "c", "d"])
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.url.path).sorted()
        #expect(files == ["a.txt", "b.txt", "d.txt"])
        #expect(try String(contentsOf: folder.url.appendingPathComponent("b.txt"), encoding: .utf8) == "photo b")
        #expect(queue.count == 0)
        #expect(queue.state == .listening)
        token.invalidate()
    }
}
