import AsyncPrimitivesTesting
import Foundation
import QueueCore
import QueueCoreTesting
import Testing

@Suite(.timeLimit(.minutes(1)))
struct JobQueueObservationTests {
    private let queue = JobQueue(handling: CuteJob.self, name: "observed")

    private static func describe(_ jobs: [CuteJob], _ event: JobQueueEvent) -> String {
        "\(event) \(jobs.map(\.action).joined(separator: ","))"
    }

    @Test
    func eachEventCarriesTheRightJobsInOrder() async {
        let seen = EventCollector<String>()
        let token = queue.observe { _, jobs, event in seen.record(Self.describe(jobs, event)) }
        let jobs = makeJobs(count: 4)
        queue.add(jobs)
        queue.remove()
        queue.cancel(id: jobs[2].id)
        queue.retry(jobs[0])
        queue.drain()

        #expect(await seen.values(count: 5) == [
            "added 0,1,2,3", "removed 0", "cancelled 2", "added 0", "removed 0,1,3",
        ])
        withExtendedLifetime(token) {}
    }

    @Test
    func processingReportsRemovedThenProcessedOrFailed() async {
        let seen = EventCollector<String>()
        let token = queue.observe { _, jobs, event in seen.record(Self.describe(jobs, event)) }
        queue.processor = AnyJobProcessor { job in
            if job.action == "1" { throw TestFailure() }
        }
        queue.add(makeJobs(count: 2))
        queue.start()

        #expect(await seen.values(count: 5) == [
            "added 0,1", "removed 0", "processed 0", "removed 1", "failedToProcess 1",
        ])
        withExtendedLifetime(token) {}
    }

    @Test
    func observersGetTheQueueItselfAndNeverRunOnTheMainThread() async {
        let seen = EventCollector<Bool>()
        let token = queue.observe { queue, _, _ in
            seen.record(queue.name == "observed" && !Thread.isMainThread)
        }
        queue.add(makeJobs(count: 1))
        #expect(await seen.values(count: 1) == [true])
        withExtendedLifetime(token) {}
    }

    @Test
    func aReleasedTokenGetsNothingMore() async {
        let first = EventCollector<String>()
        let second = EventCollector<String>()
        var token: JobQueueNotificationToken<CuteJob>? = queue.observe { _, jobs, event in
            first.record(Self.describe(jobs, event))
        }
        let witness = queue.observe { _, jobs, event in second.record(Self.describe(jobs, event)) }
        queue.add(makeJobs(count: 1, prefix: "a"))
        #expect(await first.values(count: 1) == ["added a0"])

        token = nil
        queue.add(makeJobs(count: 1, prefix: "b"))
        // The second observer hearing of "b" means delivery of "b" is over.
        #expect(await second.values(count: 2) == ["added a0", "added b0"])
        #expect(first.values == ["added a0"])
        #expect(token == nil)
        withExtendedLifetime(witness) {}
    }

    @Test
    func anInvalidatedTokenGetsNothingMore() async {
        let first = EventCollector<String>()
        let second = EventCollector<String>()
        let token = queue.observe { _, jobs, event in first.record(Self.describe(jobs, event)) }
        let witness = queue.observe { _, jobs, event in second.record(Self.describe(jobs, event)) }
        token.invalidate()
        queue.add(makeJobs(count: 1))
        #expect(await second.values(count: 1) == ["added 0"])
        #expect(first.values.isEmpty)
        withExtendedLifetime(witness) {}
    }

    @Test
    func eventsStreamDeliversTheSameEvents() async {
        let stream = queue.events
        queue.processor = AnyJobProcessor(RecordingProcessor())
        queue.add(makeJobs(count: 2))
        queue.start()

        var seen: [String] = []
        for await notification in stream {
            seen.append(Self.describe(notification.jobs, notification.event))
            if seen.count == 5 { break }
        }
        #expect(seen == ["added 0,1", "removed 0", "processed 0", "removed 1", "processed 1"])
    }

    @Test
    func eventsStreamEndsWhenTheQueueGoesAway() async throws {
        var queue: JobQueue<CuteJob>? = JobQueue(handling: CuteJob.self, name: "short-lived")
        let stream = try #require(queue).events
        queue?.add(makeJobs(count: 1))
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next()?.event == .added)
        queue = nil
        #expect(await iterator.next() == nil)
    }

    /// More jobs than one delivery batch, processed by a processor that completes at once:
    /// every job is heard of, removed then processed, in queue order, on the queue's executor,
    /// and an observer that keeps the jobs array it was given keeps what it was given.
    @Test
    func batchedDeliveryStillReportsEveryJobInOrder() async {
        let count = 1_000
        let seen = EventCollector<String>()
        let kept = EventCollector<[CuteJob]>()
        let token = queue.observe { _, jobs, event in
            seen.record(Self.describe(jobs, event) + (Thread.isMainThread ? " on main" : ""))
            kept.record(jobs)
        }
        let stream = queue.events
        queue.processor = AnyJobProcessor(RecordingProcessor())
        let jobs = makeJobs(count: count)
        queue.start()
        queue.add(jobs)

        var expected = ["added " + jobs.map(\.action).joined(separator: ",")]
        for job in jobs {
            expected.append("removed \(job.action)")
            expected.append("processed \(job.action)")
        }
        #expect(await seen.values(count: expected.count) == expected)
        let keptJobs = await kept.values(count: expected.count)
        #expect(keptJobs.dropFirst().map { $0.map(\.id) } == jobs.flatMap { [[$0.id], [$0.id]] })

        var streamed: [String] = []
        for await notification in stream {
            streamed.append(Self.describe(notification.jobs, notification.event))
            if streamed.count == expected.count { break }
        }
        #expect(streamed == expected)
        withExtendedLifetime(token) {}
    }

    /// A token does not keep its queue alive: the queue goes away while observed.
    @Test
    func aTokenDoesNotKeepItsQueueAlive() async {
        var queue: JobQueue<CuteJob>? = JobQueue(handling: CuteJob.self, name: "observed-short")
        weak let weakQueue = queue
        let token = queue?.observe { _, _, _ in }
        queue = nil
        #expect(weakQueue == nil)
        token?.invalidate()
    }
}
