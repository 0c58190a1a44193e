import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Foundation
import JobChain
import ObjectDataSource
import QueueCore
import QueuePersistence
import QueueRetry
import Synchronization
import TaskBroker
import Testing

/// The per-package examples of the top-level README, so that they keep compiling and doing
/// what the README says.
@Suite(.timeLimit(.minutes(1)))
struct ReadmeExamplesTests {
    @Test func asyncPrimitivesExampleDeliversTheValue() async throws {
        let deferred = DeferredResult<Int>()
        DispatchQueue.global().async { deferred.success(value: 42) }
        let answer = try await deferred.value
        #expect(answer == 42)
    }

    @Test func objectDataSourceExampleConcatenatesSections() throws {
        let uploads = ConcatenatingObjectDataSource(dataSources: [
            ArrayObjectDataSource(objects: ["a.jpg", "b.jpg"], sectionName: "alice"),
            ArrayObjectDataSource(objects: ["c.pdf"], sectionName: "bob"),
        ])
        #expect(uploads.numberOfSections() == 2)
        #expect(uploads.titleOfSection(1) == "bob")
        #expect(try uploads.objectAt(IndexPath(row: 0, section: 1)) == "c.pdf")
    }

    @Test func queueCoreExampleProcessesInOrder() async throws {
        let seen = EventCollector<String>()
        let queue = JobQueue(handling: Upload.self, name: "uploads")
        queue.processor = AnyJobProcessor { job in seen.record(job.id) }
        queue.add([Upload(id: "1"), Upload(id: "2")])
        queue.start() // one at a time, in order
        #expect(await seen.values(count: 2) == ["1", "2"])
    }

    @Test func queueRetryExampleSetsStrategiesAndComputesBackoff() {
        let queue = JobQueue(handling: Upload.self, name: "uploads")
        queue.retryStrategy = MaxRetryStrategy(maxAttempts: 5) // front of the queue; dropped after 5 failures
        #expect(queue.retryStrategy is MaxRetryStrategy)
        queue.retryStrategy = BackoffRetryStrategy(initialBackoff: 1, maxBackoff: 60) // stop; restart after 1, 2, 4 … s
        #expect(queue.retryStrategy is BackoffRetryStrategy)
        let delay = Backoff(initial: .milliseconds(20), maximum: .seconds(1)).delay(afterFailures: 3)
        #expect(delay == .milliseconds(80))
    }

    @Test func queuePersistenceExampleReloadsWhatWasQueued() throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("jobs.sqlite")
        do {
            let persister = try SQLiteJobPersister(handling: Upload.self, queueName: "uploads", path: path)
            let queue = try JobQueue(handling: Upload.self, name: "uploads", persister: persister)
            queue.add([Upload(id: "1")]) // on disk when add returns
        }
        let restarted = try JobQueue(
            handling: Upload.self, name: "uploads",
            persister: SQLiteJobPersister(handling: Upload.self, queueName: "uploads", path: path)
        )
        #expect(restarted.peek()?.id == "1")
    }

    @Test func jobChainExampleRunsItsStepsInOrder() async throws {
        let steps = Mutex<[String]>([])
        let job = Job.doingInBackground { steps.withLock { $0.append("fetch") } }
            .doInUtility { steps.withLock { $0.append("resize") } }
            .doInBackground { steps.withLock { $0.append("upload") } }
        try await job.idle()
        #expect(steps.withLock { $0 } == ["fetch", "resize", "upload"])
    }

    @Test func taskBrokerExampleRunsTheSavedAction() async throws {
        let folder = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: folder.path("tasks.sqlite"))
        let broker = try await TaskQueueBroker.setup(database: database, name: "sender", handler: Sender())
        let events = broker.events
        try await database.save(SendMessage(key: "m1", queueName: broker.queueName(withSuffix: "alice")))
        var succeeded: [String] = []
        for await event in events {
            if case .succeeded(let queueName, let key, _) = event {
                succeeded.append("\(queueName)/\(key)")
                break
            }
        }
        #expect(succeeded == ["sender-alice/m1"])
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }
}
