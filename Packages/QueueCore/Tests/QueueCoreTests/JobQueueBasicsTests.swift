import QueueCore
import QueueCoreTesting
import Testing

@Suite(.timeLimit(.minutes(1)))
struct JobQueueBasicsTests {
    private let queue = JobQueue(handling: CuteJob.self, name: "basics")

    @Test
    func newQueueIsStoppedAndEmpty() {
        #expect(queue.state == .stopped)
        #expect(queue.state == JobQueue<CuteJob>.State.stopped)
        #expect(queue.count == 0)
        #expect(queue.name == "basics")
    }

    @Test
    func addKeepsOrder() {
        let jobs = makeJobs(count: 3)
        queue.add(jobs)
        #expect(queue.count == 3)
        #expect(queue.drain() == jobs)
    }

    /// A retry strategy's restart applies only when nobody started or stopped the queue since its stop.
    @Test
    func aRestartTicketIsOutdatedByAnyLaterStartOrStop() {
        let ticket = queue.stopForRetry()
        #expect(queue.restart(ticket))
        #expect(queue.state != .stopped)

        let stoppedByOwner = queue.stopForRetry()
        queue.stop()
        #expect(!queue.restart(stoppedByOwner))
        #expect(queue.state == .stopped)

        let startedByOwner = queue.stopForRetry()
        queue.start()
        queue.stop()
        #expect(!queue.restart(startedByOwner))
        #expect(queue.state == .stopped)

        let first = queue.stopForRetry()
        let second = queue.stopForRetry()
        #expect(!queue.restart(first))
        #expect(queue.state == .stopped)
        #expect(queue.restart(second))
        #expect(!queue.restart(second), "a ticket is used once")
        #expect(queue.state != .stopped)
    }

    @Test
    func addingNothingIsANoOp() {
        queue.add([])
        #expect(queue.count == 0)
    }

    @Test
    func theSeedsAddOfATryQuestionJobQueuesItAndSkipsNil() throws {
        // The seed: `let job = try? ObservationUploadJob(.create, observation)`, then
        // `observationUploadQueue.add([job])` with `job` an optional.
        let job = try? makeThrowingJob(action: "created")
        let failed = try? makeThrowingJob(action: nil)
        queue.add([job])
        queue.add([failed, job])
        #expect(queue.drain().map(\.action) == ["created", "created"])
    }

    @Test
    func peekAndRemoveOnAnEmptyQueueGiveNil() {
        #expect(queue.peek() == nil)
        #expect(queue.remove() == nil)
    }

    @Test
    func peekShowsTheHeadWithoutRemovingIt() {
        let jobs = makeJobs(count: 3)
        queue.add(jobs)
        #expect(queue.peek() == jobs[0])
        #expect(queue.peek() == jobs[0])
        #expect(queue.count == 3)
    }

    @Test
    func removeReturnsTheHead() {
        let jobs = makeJobs(count: 3)
        queue.add(jobs)
        #expect(queue.remove() == jobs[0])
        #expect(queue.count == 2)
        #expect(queue.peek() == jobs[1])
    }

    @Test
    func cancelRemovesTheJobWithThatID() {
        let jobs = makeJobs(count: 3)
        queue.add(jobs)
        #expect(queue.cancel(id: jobs[1].id) == jobs[1])
        #expect(queue.cancel(jobs[2].id) == jobs[2])
        #expect(queue.cancel(id: "no such job") == nil)
        #expect(queue.drain() == [jobs[0]])
    }

    @Test
    func drainEmptiesTheQueueAndReturnsTheJobsInOrder() {
        let jobs = makeJobs(count: 4)
        queue.add(jobs)
        #expect(queue.drain() == jobs)
        #expect(queue.count == 0)
        #expect(queue.drain().isEmpty)
    }

    @Test
    func retryPutsTheJobAtTheFront() {
        let jobs = makeJobs(count: 2)
        queue.add(jobs)
        var urgent = CuteJob()
        urgent.action = "urgent"
        queue.retry(urgent)
        #expect(queue.drain() == [urgent] + jobs)
    }

    @Test
    func startWithoutAProcessorListensAndStopStops() {
        queue.add(makeJobs(count: 2))
        queue.start()
        #expect(queue.state == .listening)
        #expect(queue.count == 2)
        queue.stop()
        #expect(queue.state == .stopped)
    }
}

private struct NoAction: Error {}

/// A job initializer that throws, like the seed's `ObservationUploadJob(_:_:)`.
private func makeThrowingJob(action: String?) throws -> CuteJob {
    guard let action else { throw NoAction() }
    var job = CuteJob()
    job.action = action
    return job
}
