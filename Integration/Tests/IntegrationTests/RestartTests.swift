import AsyncPrimitivesTesting
import Foundation
import QueueCore
import QueuePersistence
import QueueRetry
import Testing

/// Queues on real storage (SQLite, files) whose process "restarts": a new queue opens the same
/// storage while the old one is abandoned mid-work.
@Suite(.timeLimit(.minutes(1)))
struct RestartTests {
    @Test func sqliteQueueRestartedDuringABackoffNeitherLosesNorRepeatsTheFailedJob() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("jobs.sqlite")
        let clock = ManualClock()
        let runs = EventCollector<String>()

        // First process: "x" fails and the queue backs off for 1 s.
        var firstQueue: JobQueue<UploadJob>? = try JobQueue(
            handling: UploadJob.self, name: "uploads",
            persister: SQLiteJobPersister(handling: UploadJob.self, queueName: "uploads", path: path)
        )
        firstQueue?.retryStrategy = BackoffRetryStrategy(initialBackoff: 1, maxBackoff: 60, clock: clock)
        firstQueue?.processor = AnyJobProcessor { job in
            runs.record("first:\(job.id)")
            throw SimulatedFailure(jobID: job.id)
        }
        firstQueue?.add([UploadJob(id: "x"), UploadJob(id: "y")])
        firstQueue?.start()
        #expect(await runs.values(count: 1) == ["first:x"])
        await clock.sleepers(atLeast: 1)
        #expect(firstQueue?.state == .stopped)
        #expect(firstQueue?.peek()?.id == "x")

        // The process dies in the middle of the backoff: its queue, strategy and timer go away.
        firstQueue?.processor = nil
        firstQueue?.retryStrategy = nil
        firstQueue = nil

        // Second process: a new queue on the same file finds both jobs, in order.
        let secondQueue = try JobQueue(
            handling: UploadJob.self, name: "uploads",
            persister: SQLiteJobPersister(handling: UploadJob.self, queueName: "uploads", path: path)
        )
        #expect(secondQueue.count == 2)
        #expect(secondQueue.peek()?.id == "x")
        secondQueue.retryStrategy = BackoffRetryStrategy(initialBackoff: 1, maxBackoff: 60, clock: clock)
        let processed = EventCollector<String>()
        let token = secondQueue.observe { _, jobs, event in
            if event == .processed { jobs.forEach { processed.record($0.id) } }
        }
        secondQueue.processor = AnyJobProcessor { job in runs.record("second:\(job.id)") }
        secondQueue.start()
        #expect(await runs.values(count: 3) == ["first:x", "second:x", "second:y"])

        // The old backoff's deadline passes; a sentinel job proves nothing ran in between.
        clock.advance(by: .seconds(3600))
        secondQueue.add([UploadJob(id: "z")])
        #expect(await processed.values(count: 3) == ["x", "y", "z"])
        #expect(runs.values == ["first:x", "second:x", "second:y", "second:z"])
        token.invalidate()
        let reopened = try SQLiteJobPersister(handling: UploadJob.self, queueName: "uploads", path: path)
        #expect(try reopened.load().map(\.id) == [])
    }

    @Test func fileQueueRestartedMidJobRedeliversThatJobAndKeepsTheRestInOrder() async throws {
        let folder = try TemporaryDirectory()
        let runs = EventCollector<String>()

        // First process: "a" succeeds; "b" fails once (retried at the front), then the process
        // dies while "b" runs again.
        var firstQueue: JobQueue<UploadJob>? = try JobQueue(
            handling: UploadJob.self, name: "Photo Uploads",
            persister: FileBasedPersister(handling: UploadJob.self, queueName: "Photo Uploads", directory: folder.url)
        )
        firstQueue?.retryStrategy = MaxRetryStrategy(maxAttempts: 3)
        firstQueue?.processor = AnyJobProcessor(
            ScriptedProcessor(label: "first", record: runs.record) { id, attempt in
                id == "b" ? (attempt == 1 ? .fail : .stall) : .succeed
            }
        )
        firstQueue?.add(["a", "b", "c", "d"].map { UploadJob(id: $0) })
        firstQueue?.start()
        #expect(await runs.values(count: 3) == ["first:a", "first:b", "first:b"])
        firstQueue?.processor = nil
        firstQueue?.retryStrategy = nil
        firstQueue = nil

        // Second process: a new queue on the same folder.
        let secondQueue = try JobQueue(
            handling: UploadJob.self, name: "Photo Uploads",
            persister: FileBasedPersister(handling: UploadJob.self, queueName: "Photo Uploads", directory: folder.url)
        )
        #expect(secondQueue.count == 3)
        #expect(secondQueue.peek()?.id == "b")
        secondQueue.retryStrategy = MaxRetryStrategy(maxAttempts: 3)
        let processed = EventCollector<String>()
        let token = secondQueue.observe { _, jobs, event in
            if event == .processed { jobs.forEach { processed.record($0.id) } }
        }
        secondQueue.processor = AnyJobProcessor(ScriptedProcessor(label: "second", record: runs.record))
        secondQueue.start()

        #expect(await processed.values(count: 3) == ["b", "c", "d"])
        // "a" is not run again; "b", which was running when the process died, is run again.
        #expect(runs.values == ["first:a", "first:b", "first:b", "second:b", "second:c", "second:d"])
        let reloaded = FileBasedPersister(handling: UploadJob.self, queueName: "Photo Uploads", directory: folder.url)
        #expect(try reloaded.load().isEmpty)
        token.invalidate()
    }
}
