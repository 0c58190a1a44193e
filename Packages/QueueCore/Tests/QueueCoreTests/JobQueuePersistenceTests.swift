import AsyncPrimitivesTesting
import Logging
import QueueCore
import QueueCoreTesting
import Testing

@Suite(.timeLimit(.minutes(1)))
struct JobQueuePersistenceTests {
    private let persister = RecordingPersister()
    private let queue = JobQueue(handling: CuteJob.self, name: "persisted")

    init() {
        queue.persister = AnyJobPersister(persister)
    }

    @Test
    func addPersistsTheJobsInOrderBeforeReturning() {
        let jobs = makeJobs(count: 3)
        queue.add(jobs)
        #expect(persister.storedIDs == jobs.map(\.id))
        #expect(persister.calls == [.persist(jobs.map(\.id))])
    }

    @Test
    func removeAndCancelDeleteButPeekDoesNot() {
        let jobs = makeJobs(count: 3)
        queue.add(jobs)
        _ = queue.peek()
        #expect(persister.storedIDs == jobs.map(\.id))
        queue.remove()
        #expect(persister.storedIDs == [jobs[1].id, jobs[2].id])
        queue.cancel(id: jobs[2].id)
        #expect(persister.storedIDs == [jobs[1].id])
    }

    @Test
    func drainDeletesEveryDrainedJob() {
        queue.add(makeJobs(count: 3))
        queue.drain()
        #expect(persister.jobs.isEmpty)
    }

    @Test
    func aNewQueueOnTheSamePersisterLoadsTheJobsInOrder() throws {
        let jobs = makeJobs(count: 5)
        queue.add(jobs)
        queue.remove()

        let restarted = try JobQueue(handling: CuteJob.self, name: "persisted", persister: persister)
        #expect(restarted.count == 4)
        #expect(restarted.drain() == Array(jobs.dropFirst()))
        #expect(restarted.persister != nil)
    }

    @Test
    func aQueueWhosePersisterCannotLoadThrowsPersistenceFailed() {
        let broken = RecordingPersister(jobs: makeJobs(count: 1), failing: true)
        let error = #expect(throws: QueueError.self) {
            try JobQueue(handling: CuteJob.self, name: "broken", persister: AnyJobPersister(broken))
        }
        #expect(error?.code == .persistenceFailed)
        #expect(error?.underlying as? TestFailure == TestFailure(reason: "unreadable"))
    }

    @Test
    func aFailingPersisterDoesNotBreakTheQueueAndTheErrorIsLoggedAndKept() async {
        let logs = RecordingLogHandler.Store()
        queue.logger = Logger(label: "test", factory: { _ in RecordingLogHandler(store: logs) })
        persister.failing = true
        let jobs = makeJobs(count: 3)

        queue.add(jobs)
        #expect(queue.count == 3)
        #expect(queue.lastPersistenceError?.code == .persistenceFailed)
        #expect(queue.lastPersistenceError?.underlying as? TestFailure == TestFailure(reason: "disk full"))
        #expect(queue.remove() == jobs[0])
        #expect(queue.cancel(id: jobs[1].id) == jobs[1])
        #expect(queue.count == 1)
        #expect(queue.lastPersistenceError?.underlying as? TestFailure == TestFailure(reason: "disk gone"))
        #expect(queue.persistenceErrorCount == 3)

        let errors = logs.messages.filter { $0.level == .error }
        #expect(errors.count == 3)
        #expect(errors.first?.message.contains("could not persist 3 added job(s)") == true)

        // Processing goes on too.
        let processor = RecordingProcessor()
        queue.processor = AnyJobProcessor(processor)
        queue.start()
        #expect(await processor.started.values(count: 1) == [jobs[2].action])
    }

    @Test
    func aJobWithTheProcessorStaysInThePersisterUntilItIsProcessed() async {
        let processor = HoldingProcessor()
        queue.processor = AnyJobProcessor(processor)
        let processed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .processed { jobs.forEach { processed.record($0.action) } }
        }
        let jobs = makeJobs(count: 2)
        queue.add(jobs)
        queue.start()

        #expect(await processor.started.values(count: 1) == ["0"])
        #expect(queue.count == 1)
        // A crash now would re-deliver job 0: it is still stored.
        #expect(persister.storedIDs == jobs.map(\.id))
        #expect(!persister.calls.contains(.delete(jobs[0].id)))

        processor.complete("0")
        #expect(await processed.values(count: 1) == ["0"])
        // Observers hear `.processed` only once the job is gone from the persister.
        #expect(persister.storedIDs == [jobs[1].id])
        withExtendedLifetime(token) {}
    }

    @Test
    func aJobWithTheProcessorSurvivesARestartAndIsDeliveredAgain() async throws {
        let processor = HoldingProcessor()
        queue.processor = AnyJobProcessor(processor)
        let jobs = makeJobs(count: 2)
        queue.add(jobs)
        queue.start()
        #expect(await processor.started.values(count: 1) == ["0"])

        // The process "dies" here; a new queue on the same storage gets both jobs back.
        let restarted = try JobQueue(handling: CuteJob.self, name: "persisted", persister: persister)
        #expect(restarted.drain() == jobs)
    }
}
