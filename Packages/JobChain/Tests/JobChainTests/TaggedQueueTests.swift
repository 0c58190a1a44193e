import AsyncPrimitivesTesting
import JobChain
import Testing

@Suite(.timeLimit(.minutes(1)))
struct TaggedQueueTests {
    private static func uniqueTag(_ name: String) -> String {
        "\(name)-\(UInt64.random(in: 0...UInt64.max))"
    }

    @Test func commandsOfTwoJobsOnOneTagNeverOverlapAndKeepSubmissionOrder() async throws {
        let tag = Self.uniqueTag("shared")
        #expect(Job.addQueue(tag: tag, priority: .utility))
        defer { Job.removeQueue(tag: tag) }
        let gate = Gate()
        let overlap = OverlapDetector()
        let done = EventCollector<String>()
        let job1 = Job(mode: .auto)
        let job2 = Job(mode: .auto)
        job1.doInCustom(tag) {
            overlap.enter()
            done.record("job1 #1 started")
            gate.wait()
            done.record("job1 #1")
            overlap.leave()
        }.doInCustom(tag) {
            overlap.enter()
            done.record("job1 #2")
            overlap.leave()
        }
        _ = await done.values(count: 1)
        // Submitted while job1 #1 holds the queue, so it runs before job1 #2 is submitted.
        job2.doInCustom(tag) {
            overlap.enter()
            done.record("job2 #1")
            overlap.leave()
        }
        gate.open()
        try await job1.idle()
        try await job2.idle()
        #expect(done.values == ["job1 #1 started", "job1 #1", "job2 #1", "job1 #2"])
        #expect(overlap.overlaps == 0)
    }

    /// Runs a job whose command holds `tag` until the returned gate opens; returns once it runs
    /// (it recorded "holder started" in the returned collector).
    private func holdTag(_ tag: String) async -> (Job, Gate, EventCollector<String>) {
        let gate = Gate()
        let ran = EventCollector<String>()
        let holder = Job(mode: .auto)
        holder.doInCustom(tag) {
            ran.record("holder started")
            gate.wait()
        }
        _ = await ran.values(count: 1)
        return (holder, gate, ran)
    }

    /// A command handed to a tag's queue while another job's command holds it has not started:
    /// `cancel()` drops it, and the queue goes on with the next job's command.
    @Test func cancelDropsACommandStillWaitingForItsTag() async throws {
        let tag = Self.uniqueTag("cancel")
        Job.addQueue(tag: tag, priority: .utility)
        defer { Job.removeQueue(tag: tag) }
        let (holder, gate, ran) = await holdTag(tag)
        let waiting = Job(mode: .auto)
        waiting.doInCustom(tag) { ran.record("cancelled") }
        waiting.cancel()
        gate.open()
        try await holder.idle()
        try await waiting.idle()
        let later = Job(mode: .auto)
        later.doInCustom(tag) { ran.record("later") }
        try await later.idle()
        #expect(ran.values == ["holder started", "later"])
    }

    /// `suspend()` stops a job whose command waits for its tag before the command starts;
    /// `resume()` runs it then, after the commands handed to the tag meanwhile.
    @Test func suspendStopsBeforeACommandWaitingForItsTagAndResumeRunsIt() async throws {
        let tag = Self.uniqueTag("suspend")
        Job.addQueue(tag: tag, priority: .utility)
        defer { Job.removeQueue(tag: tag) }
        let (holder, gate, ran) = await holdTag(tag)
        let waiting = Job(mode: .auto)
        waiting.doInCustom(tag) { ran.record("suspended") }
        waiting.suspend()
        gate.open()
        try await holder.idle()
        let later = Job(mode: .auto)
        later.doInCustom(tag) { ran.record("later") }
        try await later.idle()
        #expect(ran.values == ["holder started", "later"], "the suspended job's command did not run")
        waiting.resume()
        try await waiting.idle()
        #expect(ran.values == ["holder started", "later", "suspended"])
    }

    /// Every `suspend()`/`resume()` of a job whose command waits for its tag leaves an entry the
    /// tag skips when it gets there. 100,000 of them in a row were skipped by recursion, one
    /// level each, and the process died of a stack overflow when the holder let the tag go.
    @Test func aHundredThousandCommandsGivenUpWhileWaitingForTheirTagAreSkippedWithoutOverflow() async throws {
        let tag = Self.uniqueTag("abandoned")
        Job.addQueue(tag: tag, priority: .utility)
        defer { Job.removeQueue(tag: tag) }
        let (holder, gate, ran) = await holdTag(tag)
        let waiting = Job(mode: .auto)
        waiting.doInCustom(tag) { ran.record("waiting") }
        for _ in 0..<100_000 {
            waiting.suspend()
            waiting.resume()
        }
        gate.open()
        try await holder.idle()
        try await waiting.idle()
        #expect(ran.values == ["holder started", "waiting"])
    }

    @Test func manyJobsOnOneTagNeverOverlap() async throws {
        let tag = Self.uniqueTag("busy")
        Job.addQueue(tag: tag, priority: .background)
        defer { Job.removeQueue(tag: tag) }
        let overlap = OverlapDetector()
        let ran = Counter()
        let jobs = (0..<8).map { _ in Job(mode: .auto) }
        for job in jobs {
            for _ in 0..<25 {
                job.doInCustom(tag) {
                    overlap.enter()
                    ran.increment()
                    overlap.leave()
                }.doInCustom(tag) { () async in
                    overlap.enter()
                    await Task.yield()
                    ran.increment()
                    overlap.leave()
                }
            }
        }
        for job in jobs { try await job.idle() }
        #expect(ran.count == 8 * 25 * 2)
        #expect(overlap.overlaps == 0)
    }

    @Test func removedTagFailsTheCommandAndResumeRetriesItOnceTheTagIsBack() async throws {
        let tag = Self.uniqueTag("removed")
        Job.addQueue(tag: tag, priority: .utility)
        #expect(Job.removeQueue(tag: tag))
        #expect(Job.removeQueue(tag: tag) == false)
        let ran = Counter()
        let job = Job.doingInCustom(tag) { ran.increment() }
        await #expect { try await job.idle() } throws: { error in
            guard let error = error as? JobChainError else { return false }
            return error.code == .unknownQueue && error.message.contains(tag)
        }
        #expect((job.error() as? JobChainError)?.code == .unknownQueue)
        #expect(job.state == .stopped)
        #expect(ran.count == 0)

        Job.addQueue(tag: tag, priority: .utility)
        defer { Job.removeQueue(tag: tag) }
        job.resume()
        try await job.idle()
        #expect(ran.count == 1)
    }

    @Test func addingAnExistingTagKeepsTheFirstQueue() {
        let tag = Self.uniqueTag("twice")
        #expect(Job.addQueue(tag: tag, priority: .background))
        #expect(Job.addQueue(tag: tag, priority: .utility) == false)
        Job.removeQueue(tag: tag)
    }
}
