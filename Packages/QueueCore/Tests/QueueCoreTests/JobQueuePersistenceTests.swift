import Dispatch
import Foundation
import AsyncPrimitivesTesting
import Logging
import QueueCore
import QueueCoreTesting
import Synchronization
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
    func aDeleteThatFailsDuringADrainLeavesOnlyThatJobStored() {
        let jobs = makeJobs(count: 3)
        queue.add(jobs)
        persister.undeletable = [jobs[0].id]
        #expect(queue.drain().map(\.id) == jobs.map(\.id))
        #expect(persister.calls.filter { if case .delete = $0 { true } else { false } } == jobs.map { .delete($0.id) })
        #expect(persister.storedIDs == [jobs[0].id], "the other drained jobs are deleted")
        #expect(queue.lastPersistenceError?.code == .persistenceFailed)
        #expect(queue.lastPersistenceError?.message.contains("1 of them still stored (\(jobs[0].id))") == true)
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

    // MARK: - retry(_:) of a job that is not with the processor

    @Test
    func aRetriedJobIsStoredFirstSoItIsStillFirstAfterARestart() throws {
        let jobs = makeJobs(count: 2)
        queue.add(jobs)
        let urgent = CuteJob(action: "urgent")
        queue.retry(urgent)

        #expect(persister.calls == [.persist(jobs.map(\.id)), .persistFirst([urgent.id])])
        #expect(persister.storedIDs == [urgent.id] + jobs.map(\.id))
        let restarted = try JobQueue(handling: CuteJob.self, name: "persisted", persister: persister)
        #expect(restarted.drain() == [urgent] + jobs)
    }

    @Test
    func retryingAStoredJobMovesItToTheFrontOfTheStorage() throws {
        let jobs = makeJobs(count: 3)
        queue.add(jobs)
        var changed = jobs[2]
        changed.action = "changed"
        queue.retry(changed)

        #expect(persister.jobs == [changed, jobs[0], jobs[1]])
        let restarted = try JobQueue(handling: CuteJob.self, name: "persisted", persister: persister)
        #expect(restarted.peek() == changed)
        #expect(restarted.count == 3)
    }

    @Test
    func aRetryThatCannotBeStoredIsQueuedFirstInMemoryAndStorageKeepsWhatItHad() throws {
        let logs = RecordingLogHandler.Store()
        queue.logger = Logger(label: "test", factory: { _ in RecordingLogHandler(store: logs) })
        let jobs = makeJobs(count: 2)
        queue.add(jobs)
        persister.failing = true
        let urgent = CuteJob(action: "urgent")
        queue.retry(urgent)
        var changed = jobs[1]
        changed.action = "changed"
        queue.retry(changed)

        // In memory, both are queued first, as if storing had worked.
        #expect(queue.peek() == changed)
        #expect(queue.count == 4)
        // The errors are counted, kept and logged.
        #expect(queue.persistenceErrorCount == 2)
        #expect(queue.lastPersistenceError?.code == .persistenceFailed)
        #expect(queue.lastPersistenceError?.underlying as? TestFailure == TestFailure(reason: "disk full"))
        let errors = logs.messages.filter { $0.level == .error }.map(\.message)
        #expect(errors.count == 2)
        #expect(errors.last?.contains("could not store retried job \(changed.id) at the front") == true)
        // Storage holds what it held: the failed retry neither lost nor changed a stored job.
        #expect(persister.jobs == jobs)

        // Once the persister works again, so does retry.
        persister.failing = false
        let later = CuteJob(action: "later")
        queue.retry(later)
        #expect(persister.storedIDs == [later.id] + jobs.map(\.id))
        #expect(queue.drain().map(\.action) == ["later", "changed", "urgent", "0", "1"])
    }

    @Test
    func aFailedJobThatTheStrategyRequeuesIsNotStoredAgain() async {
        let processor = HoldingProcessor()
        queue.processor = AnyJobProcessor(processor)
        queue.retryStrategy = RequeueAtTheFront()
        let added = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .added { jobs.forEach { added.record($0.action) } }
        }
        let jobs = makeJobs(count: 2)
        queue.add(jobs)
        queue.start()
        #expect(await processor.started.values(count: 1) == ["0"])
        queue.stop()
        processor.complete("0", error: TestFailure())

        #expect(await added.values(count: 3) == ["0", "1", "0"])
        #expect(queue.peek() == jobs[0])
        // Still stored in its own place, which is first: no write for the requeue.
        #expect(persister.calls == [.persist(jobs.map(\.id))])
        #expect(persister.storedIDs == jobs.map(\.id))
        withExtendedLifetime(token) {}
    }

    /// Queues jobs "0" and "1" with a strategy that puts a failed job back first, starts the
    /// queue until "0" is with the processor, stops it, and retries an "urgent" job, which is
    /// stored ahead of "0". Returns the processor holding "0", the actions of every `.added`
    /// event, the observer's token, and the two jobs.
    private func jobOvertakenInStorageWhileProcessed() async
        -> (HoldingProcessor, EventCollector<String>, JobQueueNotificationToken<CuteJob>, [CuteJob]) {
        let processor = HoldingProcessor()
        queue.processor = AnyJobProcessor(processor)
        queue.retryStrategy = RequeueAtTheFront()
        let added = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .added { jobs.forEach { added.record($0.action) } }
        }
        let jobs = makeJobs(count: 2)
        queue.add(jobs)
        queue.start()
        #expect(await processor.started.values(count: 1) == ["0"])
        queue.stop()
        queue.retry(CuteJob(action: "urgent"))
        return (processor, added, token, jobs)
    }

    /// Found while fixing `retry(_:)`: a job with the processor kept its stored place when its
    /// strategy put it back at the front, so a job that `retry(_:)` stored first while it was
    /// being processed stayed ahead of it in storage, and a restart swapped the two. The
    /// requeued job is now moved to the front of storage too.
    @Test
    func aFailedJobRequeuedAfterAnotherJobWasRetriedIsFirstInStorageToo() async {
        let (processor, added, token, jobs) = await jobOvertakenInStorageWhileProcessed()
        processor.complete("0", error: TestFailure())

        #expect(await added.values(count: 4) == ["0", "1", "urgent", "0"])
        #expect(persister.jobs.map(\.action) == ["0", "urgent", "1"], "storage keeps the order the queue has in memory")
        #expect(persister.calls.last == .persistFirst([jobs[0].id]), "one write moves the requeued job to the front")
        #expect(queue.drain().map(\.action) == ["0", "urgent", "1"])
        withExtendedLifetime(token) {}
    }

    /// A `cancel` of the requeued job while the move to the front of storage runs: the job is
    /// either cancelled (deleted, not queued) or not (queued and stored), never cancelled in
    /// memory and stored again by the move (it then ran after a restart).
    @Test
    func aCancelDuringTheMoveToTheFrontOfStorageLeavesNoCancelledJobStored() async {
        let (processor, added, token, jobs) = await jobOvertakenInStorageWhileProcessed()
        let moving = EventCollector<String>()
        let proceed = DispatchSemaphore(value: 0)
        persister.willPersistFirst = { ids in
            guard ids == [jobs[0].id] else { return }
            moving.record(ids[0])
            proceed.wait()
        }
        processor.complete("0", error: TestFailure())
        _ = await moving.values(count: 1)
        let cancelled = queue.cancel(id: jobs[0].id)
        proceed.signal()
        #expect(await added.values(count: 4).last == "0", "the retry strategy's requeue is recorded")
        let stored = persister.storedIDs.contains(jobs[0].id)
        let queued = queue.drain().contains { $0.id == jobs[0].id }
        #expect(cancelled == nil ? stored && queued : !stored && !queued,
                "cancelled: \(cancelled != nil), stored: \(stored), queued: \(queued)")
        withExtendedLifetime(token) {}
    }

    /// The move to the front of storage fails: the requeued job is still first in memory, the
    /// error is kept, and storage keeps what it had (the job in its old place, nothing lost).
    @Test
    func aRequeuedJobThatCannotBeMovedToTheFrontOfStorageStaysFirstInMemoryAndStored() async {
        let (processor, added, token, _) = await jobOvertakenInStorageWhileProcessed()
        persister.failing = true
        processor.complete("0", error: TestFailure())

        #expect(await added.values(count: 4) == ["0", "1", "urgent", "0"])
        #expect(queue.lastPersistenceError?.code == .persistenceFailed)
        #expect(persister.jobs.map(\.action) == ["urgent", "0", "1"], "storage unchanged: every job still stored")
        #expect(queue.drain().map(\.action) == ["0", "urgent", "1"])
        withExtendedLifetime(token) {}
    }
}

/// A processor that calls its completion twice: the job's failure is handled (its strategy puts
/// it back first, still stored) before a late success of the same run arrives.
@Suite(.timeLimit(.minutes(1)))
struct JobQueueLateCompletionTests {
    @Test
    func aSuccessReportedAfterTheFailureLeavesTheRequeuedJobStored() async {
        let persister = RecordingPersister()
        let queue = JobQueue(handling: CuteJob.self, name: "late")
        queue.persister = AnyJobPersister(persister)
        let processor = KeptCompletionProcessor()
        queue.processor = AnyJobProcessor(processor)
        queue.retryStrategy = StopAndRequeue()
        let events = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            events.record("\(event) \(jobs.map(\.action).joined())")
        }
        let job = makeJobs(count: 1)[0]
        queue.add([job])
        queue.start()
        _ = await processor.started.values(count: 1)
        await processor.complete(job, error: TestFailure())
        // The strategy stopped the queue and put the job back first; its stored copy stays.
        #expect(await events.values(count: 4) == ["added 0", "removed 0", "failedToProcess 0", "added 0"])
        #expect(persister.storedIDs == [job.id])

        await processor.complete(job, error: nil)
        #expect(persister.storedIDs == [job.id], "the late success deleted the stored copy of a job still queued")
        #expect(queue.peek()?.id == job.id)
        #expect(!persister.calls.contains(.delete(job.id)))
        withExtendedLifetime(token) {}
    }
}

/// Stops the queue and puts the failed job back first (the seed's `HaltRetryStrategy`).
private struct StopAndRequeue: JobRetryStrategy {
    fileprivate func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
        queue.stop()
        queue.retry(job)
    }
}

/// Puts every failed job back at the front of its queue.
private struct RequeueAtTheFront: JobRetryStrategy {
    fileprivate func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
        queue.retry(job)
    }
}
