import AsyncPrimitivesTesting
import Dispatch
import QueueCore
import QueueCoreTesting
import Synchronization
import Testing

/// Observers hear a drain pass in batches; these tests hold that to the contract: every
/// event, in order, on the queue's executor, one call at a time, nothing after a token is
/// invalidated, nothing recorded before an observer was registered, and nothing kept alive.
@Suite(.timeLimit(.minutes(1)))
struct JobQueueBatchedDeliveryTests {
    private static func describe(_ jobs: [CuteJob], _ event: JobQueueEvent) -> String {
        "\(event) \(jobs.map(\.action).joined(separator: ","))"
    }

    /// What observers must hear when `jobs` are added to a stopped queue, two are cancelled,
    /// and the queue is started with a processor that fails `failing` once each and a
    /// strategy that retries at the front.
    private static func expectedEvents(_ jobs: [CuteJob], cancelled: [String], failing: Set<String>) -> [String] {
        var expected = ["added " + jobs.map(\.action).joined(separator: ",")]
        expected += cancelled.map { "cancelled \($0)" }
        for job in jobs where !cancelled.contains(job.action) {
            expected.append("removed \(job.action)")
            if failing.contains(job.action) {
                expected += ["failedToProcess \(job.action)", "added \(job.action)", "removed \(job.action)"]
            }
            expected.append("processed \(job.action)")
        }
        return expected
    }

    @Test(arguments: [false, true])
    func everyObserverAndTheStreamHearEveryEventInOrderOnTheExecutor(offThread: Bool) async {
        let name = "batched-\(offThread)"
        let queue = JobQueue(handling: CuteJob.self, name: name)
        let jobs = makeJobs(count: 700)
        let failing: Set<String> = ["3", "255", "256", "511", "698"]
        let cancelled = ["10", "600"]
        let expected = Self.expectedEvents(jobs, cancelled: cancelled, failing: failing)
        let first = EventCollector<String>()
        let second = EventCollector<String>()
        let wrongExecutor = EventCollector<String>()
        let overlap = OverlapDetector()
        let label = executorLabel(ofQueueNamed: name)
        let firstToken = queue.observe { _, jobs, event in
            overlap.run {
                if currentDispatchQueueLabel() != label { wrongExecutor.record(currentDispatchQueueLabel()) }
                first.record(Self.describe(jobs, event))
            }
        }
        let secondToken = queue.observe { _, jobs, event in
            overlap.run { second.record(Self.describe(jobs, event)) }
        }
        let stream = queue.events
        queue.processor = AnyJobProcessor(FailingOnceProcessor(failing: failing, offThread: offThread))
        queue.retryStrategy = RetryOnceStrategy()
        queue.add(jobs)
        for action in cancelled {
            queue.cancel(id: jobs[Int(action)!].id)
        }
        queue.start()

        #expect(await first.values(count: expected.count) == expected)
        #expect(await second.values(count: expected.count) == expected)
        var streamed: [String] = []
        for await notification in stream {
            streamed.append(Self.describe(notification.jobs, notification.event))
            if streamed.count == expected.count { break }
        }
        #expect(streamed == expected)
        #expect(wrongExecutor.values.isEmpty)
        #expect(!overlap.sawOverlap)
        withExtendedLifetime((firstToken, secondToken)) {}
    }

    /// A delivery batch keeps the jobs of one-job events apart from the arrays of events about
    /// several jobs, and hands every one-job event's job in one reused array: an observer
    /// that keeps each array it was given must still find each event's own jobs in it, with
    /// events about several jobs between one-job events of the same batch.
    @Test
    func anObserverThatKeepsEveryJobArrayItWasGivenFindsEachEventsOwnJobs() async {
        let queue = JobQueue(handling: CuteJob.self, name: "kept-arrays")
        let kept = EventCollector<(JobQueueEvent, [CuteJob])>()
        let token = queue.observe { _, jobs, event in kept.record((event, jobs)) }
        let adding: Set<String> = ["5", "6", "150", "299"]
        // Adds two jobs while it processes each job of `adding`: an event about two jobs
        // recorded between one-job events, in the middle of a delivery batch (two of them in
        // one batch for "5" and "6").
        queue.processor = AnyJobProcessor(CallbackProcessor { job in
            if adding.contains(job.action) {
                queue.add(makeJobs(count: 2, prefix: "from\(job.action)-"))
            }
        })
        let jobs = makeJobs(count: 300)
        var expected = ["added " + jobs.map(\.action).joined(separator: ",")]
        for job in jobs {
            expected.append("removed \(job.action)")
            if adding.contains(job.action) {
                expected.append("added from\(job.action)-0,from\(job.action)-1")
            }
            expected.append("processed \(job.action)")
        }
        for action in ["5", "6", "150", "299"] {
            for index in 0..<2 {
                expected += ["removed from\(action)-\(index)", "processed from\(action)-\(index)"]
            }
        }
        queue.add(jobs)
        queue.start()

        let heard = await kept.values(count: expected.count)
        // Read only once every event was delivered: an array that a later event rewrote would
        // show that event's job here.
        #expect(heard.map { Self.describe($0.1, $0.0) } == expected)
        withExtendedLifetime(token) {}
    }

    @Test
    func anObserverThatInvalidatesItsOwnTokenMidBatchHearsNothingMore() async {
        let queue = JobQueue(handling: CuteJob.self, name: "self-invalidating")
        let heard = EventCollector<String>()
        let witness = EventCollector<String>()
        let tokenBox = Mutex<JobQueueNotificationToken<CuteJob>?>(nil)
        let count = Atomic(0)
        let token = queue.observe { _, jobs, event in
            heard.record(Self.describe(jobs, event))
            // The 100th event is in the middle of the first delivery batch.
            if count.add(1, ordering: .relaxed).newValue == 100 {
                tokenBox.withLock { $0?.invalidate() }
            }
        }
        tokenBox.withLock { $0 = token }
        let witnessToken = queue.observe { _, jobs, event in witness.record(Self.describe(jobs, event)) }
        queue.processor = AnyJobProcessor(RecordingProcessor())
        queue.start()
        queue.add(makeJobs(count: 400))

        let all = await witness.values(count: 801)
        #expect(heard.values == Array(all.prefix(100)))
        withExtendedLifetime(witnessToken) {}
    }

    /// A queue's only observer is delivered to on a path of its own (its block read once per
    /// batch); it too hears nothing after it invalidates its token in the middle of a batch.
    @Test
    func aSoleObserverThatInvalidatesItsOwnTokenMidBatchHearsNothingMore() async {
        let queue = JobQueue(handling: CuteJob.self, name: "sole-self-invalidating")
        let heard = EventCollector<String>()
        let tokenBox = Mutex<JobQueueNotificationToken<CuteJob>?>(nil)
        let count = Atomic(0)
        let token = queue.observe { _, jobs, event in
            heard.record(Self.describe(jobs, event))
            // The 100th event is in the middle of a delivery batch.
            if count.add(1, ordering: .relaxed).newValue == 100 {
                tokenBox.withLock { $0?.invalidate() }
            }
        }
        tokenBox.withLock { $0 = token }
        let processor = RecordingProcessor()
        queue.processor = AnyJobProcessor(processor)
        let jobs = makeJobs(count: 400)
        queue.add(jobs)
        queue.start()

        // A job starts only while fewer than 256 events wait for delivery, so by the time the
        // last one starts, at least 799 - 255 = 544 events have been delivered.
        _ = await processor.started.values(count: 400)
        var expected = ["added " + jobs.map(\.action).joined(separator: ",")]
        for job in jobs {
            expected += ["removed \(job.action)", "processed \(job.action)"]
        }
        #expect(heard.values == Array(expected.prefix(100)))
    }

    @Test
    func anObserverWhoseTokenIsReleasedByAnotherObserverMidBatchHearsNothingMore() async {
        let queue = JobQueue(handling: CuteJob.self, name: "released-mid-batch")
        let heard = EventCollector<String>()
        let witness = EventCollector<String>()
        let tokenBox = Mutex<JobQueueNotificationToken<CuteJob>?>(nil)
        tokenBox.withLock {
            $0 = queue.observe { _, jobs, event in heard.record(Self.describe(jobs, event)) }
        }
        let count = Atomic(0)
        // Registered second, so for each event it runs after the first observer.
        let witnessToken = queue.observe { _, jobs, event in
            witness.record(Self.describe(jobs, event))
            if count.add(1, ordering: .relaxed).newValue == 50 {
                let released = tokenBox.withLock { box -> JobQueueNotificationToken<CuteJob>? in
                    defer { box = nil }
                    return box
                }
                _ = consume released
            }
        }
        queue.processor = AnyJobProcessor(RecordingProcessor())
        queue.start()
        queue.add(makeJobs(count: 400))

        let all = await witness.values(count: 801)
        #expect(heard.values == Array(all.prefix(50)))
        withExtendedLifetime(witnessToken) {}
    }

    @Test
    func aTokenInvalidatedFromAnotherThreadWhileItsBatchIsBeingDeliveredHearsNothingMore() async {
        let queue = JobQueue(handling: CuteJob.self, name: "invalidated-outside")
        let heard = EventCollector<String>()
        let witness = EventCollector<String>()
        let gate = ExecutorGate()
        let token = queue.observe { _, jobs, event in heard.record(Self.describe(jobs, event)) }
        let witnessToken = queue.observe { _, jobs, event in
            witness.record(Self.describe(jobs, event))
            if jobs.first?.action == "a0" { gate.hold() }
        }
        queue.add(makeJobs(count: 1, prefix: "a"))
        await gate.waitUntilHeld()
        // The executor is inside the witness, delivering "added a0"; these events wait.
        queue.add(makeJobs(count: 1, prefix: "b"))
        queue.add(makeJobs(count: 1, prefix: "c"))
        token.invalidate()
        gate.open()

        #expect(await witness.values(count: 3) == ["added a0", "added b0", "added c0"])
        #expect(heard.values == ["added a0"])
        withExtendedLifetime(witnessToken) {}
    }

    @Test
    func anObserverRegisteredWhileEventsWaitForDeliveryHearsOnlyLaterEvents() async {
        let queue = JobQueue(handling: CuteJob.self, name: "late-observer")
        let witness = EventCollector<String>()
        let late = EventCollector<String>()
        let gate = ExecutorGate()
        let witnessToken = queue.observe { _, jobs, event in
            witness.record(Self.describe(jobs, event))
            if jobs.first?.action == "a0" { gate.hold() }
        }
        queue.add(makeJobs(count: 1, prefix: "a"))
        await gate.waitUntilHeld()
        // Recorded before the late observer and the stream exist, delivered after.
        queue.add(makeJobs(count: 1, prefix: "b"))
        let lateToken = queue.observe { _, jobs, event in late.record(Self.describe(jobs, event)) }
        let stream = queue.events
        queue.add(makeJobs(count: 1, prefix: "c"))
        gate.open()

        #expect(await witness.values(count: 3) == ["added a0", "added b0", "added c0"])
        #expect(await late.values(count: 1) == ["added c0"])
        var iterator = stream.makeAsyncIterator()
        let firstStreamed = await iterator.next()
        #expect(firstStreamed.map { Self.describe($0.jobs, $0.event) } == "added c0")
        #expect(late.values == ["added c0"])
        withExtendedLifetime((witnessToken, lateToken)) {}
    }

    @Test
    func aSoleObserverRegisteredWhileEventsWaitForDeliveryHearsOnlyLaterEvents() async {
        let queue = JobQueue(handling: CuteJob.self, name: "sole-late-observer")
        let late = EventCollector<String>()
        let gate = ExecutorGate()
        let first = queue.observe { _, jobs, _ in
            if jobs.first?.action == "a0" { gate.hold() }
        }
        queue.add(makeJobs(count: 1, prefix: "a"))
        await gate.waitUntilHeld()
        // Recorded while the first observer is registered, delivered once it is gone and the
        // late one is the queue's only observer (the path that reads its block once per batch).
        queue.add(makeJobs(count: 1, prefix: "b"))
        first.invalidate()
        let lateToken = queue.observe { _, jobs, event in late.record(Self.describe(jobs, event)) }
        queue.add(makeJobs(count: 1, prefix: "c"))
        gate.open()

        #expect(await late.values(count: 1) == ["added c0"])
        withExtendedLifetime(lateToken) {}
    }

    @Test
    func aReleasedObserverAndADeadQueueAreReleased() async {
        var queue: JobQueue<CuteJob>? = JobQueue(handling: CuteJob.self, name: "released")
        // Ends when the queue is deinitialized.
        let ended = queue?.events
        let released = EventCollector<Void>()
        var captured: DeinitProbe? = DeinitProbe(released)
        let heard = EventCollector<Int>()
        var token = queue?.observe { [captured] _, jobs, _ in
            withExtendedLifetime(captured) { heard.record(jobs.count) }
        }
        captured = nil
        queue?.processor = AnyJobProcessor(RecordingProcessor())
        queue?.start()
        queue?.add(makeJobs(count: 300))
        _ = await heard.values(count: 601)
        token?.invalidate()
        token = nil
        // Awaited, not checked at once: the queue may still be delivering the last batch (holding
        // the block and itself) when the test hears its last event. Never released: the time limit.
        #expect(await released.values(count: 1).count == 1, "the observer's block is released")
        queue = nil
        if let ended {
            for await _ in ended {}
        }
    }
}

/// Records its own deinitialization.
private final class DeinitProbe: Sendable {
    let released: EventCollector<Void>

    init(_ released: EventCollector<Void>) {
        self.released = released
    }

    deinit {
        released.record(())
    }
}
