import AsyncPrimitivesTesting
import QueueCore
import QueueCoreTesting
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(1)))
struct JobQueueProcessingTests {
    private let queue = JobQueue(handling: CuteJob.self, name: "processing")

    @Test
    func nothingIsProcessedBeforeStart() async {
        let processor = HoldingProcessor()
        queue.processor = AnyJobProcessor(processor)
        let jobs = makeJobs(count: 3)
        queue.add(jobs)

        #expect(processor.started.count == 0)
        #expect(queue.count == 3)
        #expect(queue.peek() == jobs[0])
        #expect(queue.state == .stopped)
    }

    @Test
    func afterStartEveryJobIsProcessedInOrderAndTheQueueListens() async {
        let processor = RecordingProcessor()
        queue.processor = AnyJobProcessor(processor)
        let processed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .processed { jobs.forEach { processed.record($0.action) } }
        }
        queue.start()
        queue.add(makeJobs(count: 5))

        #expect(await processed.values(count: 5) == ["0", "1", "2", "3", "4"])
        #expect(processor.started.values == ["0", "1", "2", "3", "4"])
        #expect(queue.count == 0)
        #expect(queue.state == .listening)
        withExtendedLifetime(token) {}
    }

    @Test
    func jobsAddedAfterTheQueueWentIdleAreProcessedToo() async {
        let processor = RecordingProcessor()
        queue.processor = AnyJobProcessor(processor)
        queue.start()
        queue.add(makeJobs(count: 2, prefix: "a"))
        #expect(await processor.started.values(count: 2) == ["a0", "a1"])
        queue.add(makeJobs(count: 2, prefix: "b"))
        #expect(await processor.started.values(count: 4) == ["a0", "a1", "b0", "b1"])
    }

    @Test
    func withoutARetryStrategyAFailedJobIsDroppedAndDeletedFromThePersister() async {
        let persister = RecordingPersister()
        queue.persister = AnyJobPersister(persister)
        queue.processor = AnyJobProcessor(FailingProcessor())
        let failed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .failedToProcess { jobs.forEach { failed.record($0.action) } }
        }
        let jobs = makeJobs(count: 3)
        queue.add(jobs)
        queue.start()

        #expect(await failed.values(count: 3) == ["0", "1", "2"])
        #expect(queue.count == 0)
        #expect(queue.state == .listening)
        #expect(persister.jobs.isEmpty)
        withExtendedLifetime(token) {}
    }

    @Test
    func stopDuringALongRunLeavesTheRestQueuedAndEndsStopped() async {
        let jobs = makeJobs(count: 1000)
        let queue = queue
        let processor = CallbackProcessor { job in
            if job.action == "9" { queue.stop() }
        }
        queue.processor = AnyJobProcessor(processor)
        let processed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .processed { jobs.forEach { processed.record($0.action) } }
        }
        queue.add(jobs)
        queue.start()

        let done = await processed.values(count: 10)
        #expect(done.last == "9")
        #expect(queue.state == .stopped)
        #expect(queue.count == 990)
        #expect(queue.peek() == jobs[10])
        withExtendedLifetime(token) {}
    }

    @Test
    func stopWhileAJobIsWithTheProcessorWaitsForItAsStopping() async {
        let processor = HoldingProcessor()
        queue.processor = AnyJobProcessor(processor)
        let processed = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .processed { jobs.forEach { processed.record($0.action) } }
        }
        queue.add(makeJobs(count: 3))
        queue.start()
        #expect(await processor.started.values(count: 1) == ["0"])
        #expect(queue.state == .processing)

        queue.stop()
        #expect(queue.state == .stopping)
        processor.complete("0")

        #expect(await processed.values(count: 1) == ["0"])
        #expect(queue.state == .stopped)
        #expect(queue.count == 2)
        #expect(processor.started.count == 1)
        withExtendedLifetime(token) {}
    }

    @Test
    func aRetryStrategyThatStopsTheQueueFindsItStoppedAndTheFailedJobBackFirst() async {
        let seen = EventCollector<JobQueueState>()
        queue.processor = AnyJobProcessor(FailingProcessor())
        queue.retryStrategy = StopAndRecordState(record: seen.record)
        queue.add(makeJobs(count: 2))
        queue.start()

        // The failed job is with the strategy, not the processor: nothing is left to wait for.
        #expect(await seen.values(count: 1) == [.stopped])
        #expect(queue.state == .stopped)
        #expect(queue.peek()?.action == "0")
        #expect(queue.count == 2)
    }

    @Test
    func aQueueStoppedWhileItsJobRanStaysStoppedAfterTheFailedJobsBackoff() async {
        let processor = HoldingProcessor()
        let restarted = EventCollector<Bool>()
        queue.processor = AnyJobProcessor(processor)
        queue.retryStrategy = StopAndRestartAtOnce(record: restarted.record)
        queue.add(makeJobs(count: 2))
        queue.start()
        #expect(await processor.started.values(count: 1) == ["0"])

        queue.stop()
        processor.complete("0", error: TestFailure())

        // The strategy's restart would undo the owner's stop, which came after the job began.
        #expect(await restarted.values(count: 1) == [false])
        #expect(queue.state == .stopped)
        #expect(queue.peek()?.action == "0")
        #expect(processor.started.values == ["0"])
    }

    @Test
    func asyncProcessorProcessesEveryJobInOrder() async {
        let seen = EventCollector<String>()
        queue.processor = AnyJobProcessor { job in
            await Task.yield()
            seen.record(job.action)
        }
        queue.add(makeJobs(count: 4))
        queue.start()
        #expect(await seen.values(count: 4) == ["0", "1", "2", "3"])
    }

    @Test
    func asyncProcessorErrorsCountAsFailures() async {
        let retried = EventCollector<String>()
        queue.processor = AnyJobProcessor { job in
            if job.action == "1" { throw TestFailure(reason: "bad job") }
        }
        let token = queue.observe { _, jobs, event in
            retried.record("\(event) \(jobs.map(\.action).joined())")
        }
        queue.add(makeJobs(count: 2))
        queue.start()
        let events = await retried.values(count: 5)
        #expect(events == ["added 01", "removed 0", "processed 0", "removed 1", "failedToProcess 1"])
        #expect(queue.count == 0)
        withExtendedLifetime(token) {}
    }

    @Test
    func maxConcurrentJobsHandsOutThatManyJobsAtOnceInFIFOOrder() async {
        let processor = HoldingProcessor()
        queue.processor = AnyJobProcessor(processor)
        queue.maxConcurrentJobs = 3
        #expect(queue.maxConcurrentJobs == 3)
        queue.add(makeJobs(count: 5))
        queue.start()

        #expect(await processor.started.values(count: 3) == ["0", "1", "2"])
        #expect(queue.count == 2)
        processor.complete("1")
        #expect(await processor.started.values(count: 4) == ["0", "1", "2", "3"])
        processor.complete("0")
        processor.complete("2")
        processor.complete("3")
        #expect(await processor.started.values(count: 5) == ["0", "1", "2", "3", "4"])
        #expect(processor.started.count == 5)
    }

    @Test
    func maxConcurrentJobsBelowOneIsTreatedAsOne() {
        queue.maxConcurrentJobs = 0
        #expect(queue.maxConcurrentJobs == 1)
    }

    @Test
    func aCompletionCalledTwiceIsIgnored() async {
        let processed = EventCollector<String>()
        final class TwiceProcessor: JobProcessor, Sendable {
            func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
                completion(job, nil)
                completion(job, TestFailure())
            }
        }
        queue.processor = AnyJobProcessor(TwiceProcessor())
        let token = queue.observe { _, jobs, event in
            processed.record("\(event) \(jobs.map(\.action).joined())")
        }
        queue.add(makeJobs(count: 2))
        queue.start()
        let events = await processed.values(count: 5)
        #expect(events == ["added 01", "removed 0", "processed 0", "removed 1", "processed 1"])
        #expect(queue.state == .listening)
        withExtendedLifetime(token) {}
    }
}

@Suite(.timeLimit(.minutes(1)))
struct JobQueueRetryStrategyHookTests {
    /// Re-queues every failed job until it has failed `limit` times, and records what it saw.
    private struct CountingStrategy: JobRetryStrategy {
        let limit: Int
        let seen: EventCollector<Int>

        func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
            let failures = queue.failureCount(ofJobWithID: job.id)
            seen.record(failures)
            if failures < limit { queue.retry(job) }
        }
    }

    @Test
    func strategySeesTheFailureCountAndARequeuedJobStaysInThePersister() async {
        let queue = JobQueue(handling: CuteJob.self, name: "hook")
        let persister = RecordingPersister()
        queue.persister = AnyJobPersister(persister)
        let seen = EventCollector<Int>()
        queue.retryStrategy = CountingStrategy(limit: 3, seen: seen)
        let processor = HoldingProcessor()
        queue.processor = AnyJobProcessor(processor)
        let failures = EventCollector<String>()
        let token = queue.observe { _, jobs, event in
            if event == .failedToProcess { jobs.forEach { failures.record($0.action) } }
        }
        let job = makeJobs(count: 1)[0]
        queue.add([job])
        queue.start()

        #expect(await processor.started.values(count: 1) == ["0"])
        processor.complete("0", error: TestFailure())
        #expect(await processor.started.values(count: 2) == ["0", "0"])
        #expect(seen.values == [1])
        #expect(queue.failureCount(ofJobWithID: job.id) == 1)
        #expect(persister.storedIDs == [job.id])
        // A strategy's re-queue does not persist the job again.
        #expect(persister.calls == [.persist([job.id])])

        processor.complete("0", error: TestFailure())
        #expect(await processor.started.values(count: 3) == ["0", "0", "0"])
        processor.complete("0", error: TestFailure())
        // Observers hear of a failure after the strategy has decided and the purge is done.
        #expect(await failures.values(count: 3) == ["0", "0", "0"])
        #expect(seen.values == [1, 2, 3])
        #expect(persister.jobs.isEmpty)
        #expect(queue.count == 0)
        #expect(queue.state == .listening)
        #expect(queue.failureCount(ofJobWithID: job.id) == 0)
        withExtendedLifetime(token) {}
    }
}

/// Stops the queue as a retry strategy does, records the state it finds and puts the job back first.
private struct StopAndRecordState: JobRetryStrategy {
    let record: @Sendable (JobQueueState) -> Void

    fileprivate func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
        _ = queue.stopForRetry()
        record(queue.state)
        queue.retry(job)
    }
}

/// Stops the queue for a retry, puts the job back first and restarts the queue at once (a backoff
/// of zero), recording whether the restart took.
private struct StopAndRestartAtOnce: JobRetryStrategy {
    let record: @Sendable (Bool) -> Void

    fileprivate func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
        let ticket = queue.stopForRetry()
        queue.retry(job)
        record(queue.restart(ticket))
    }
}
