import AsyncPrimitivesTesting
import QueueCore
import QueueCoreTesting
import QueueRetry
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ReadmeExampleTests {
    @Test
    func readmeExampleRetriesAFlakyUploadAndPurgesAHopelessOne() async {
        let tries = Mutex<[String: Int]>([:])
        let uploaded = EventCollector<String>()
        let upload: @Sendable (CuteJob) async throws -> Void = { job in
            let attempt = tries.withLock { tries -> Int in
                tries[job.action, default: 0] += 1
                return tries[job.action, default: 0]
            }
            // "flaky" works on its third attempt; "hopeless" never does.
            if job.action == "hopeless" || (job.action == "flaky" && attempt < 3) { throw TestFailure() }
            uploaded.record(job.action)
        }
        let jobs = [makeJob("flaky"), makeJob("hopeless"), makeJob("fine")]
        let failures = EventCollector<String>()

        let queue = JobQueue(handling: CuteJob.self, name: "Uploads")
        queue.processor = AnyJobProcessor { job in try await upload(job) }
        queue.retryStrategy = MaxRetryStrategy(maxAttempts: 5)      // 5 attempts, then purged
        let token = queue.observe { _, jobs, event in
            if event == .failedToProcess { jobs.forEach { failures.record($0.action) } }
        }
        queue.add(jobs)
        queue.start()

        #expect(await uploaded.values(count: 2) == ["flaky", "fine"])
        // Observers hear a drain pass's events in a batch, after its jobs ran: wait for all seven.
        #expect(await failures.values(count: 7) == ["flaky", "flaky"] + Array(repeating: "hopeless", count: 5))
        #expect(queue.count == 0)
        withExtendedLifetime(token) {}
    }
}
