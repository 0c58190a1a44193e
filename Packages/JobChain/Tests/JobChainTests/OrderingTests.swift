import AsyncPrimitivesTesting
import Dispatch
import JobChain
import Testing

@Suite(.timeLimit(.minutes(1)))
struct OrderingTests {
    @Test func commandsRunOneAfterAnotherInOrderAcrossEveryKindOfQueue() async throws {
        let tag = "ordering-\(UInt64.random(in: 0...UInt64.max))"
        Job.addQueue(tag: tag, priority: .utility)
        defer { Job.removeQueue(tag: tag) }
        let overlap = OverlapDetector()
        let done = EventCollector<Int>()
        let job = Job(mode: .auto)
        for index in 0..<200 {
            let command: @Sendable () -> Void = {
                overlap.enter()
                done.record(index)
                overlap.leave()
            }
            switch index % 5 {
            case 0: job.doInBackground(command)
            case 1: job.doInUtility(command)
            case 2: job.doInMain(command)
            case 3: job.doInCustom(tag, command)
            default: job.doInBackground { () async in command() }
            }
        }
        try await job.idle()
        #expect(done.values == Array(0..<200))
        #expect(overlap.overlaps == 0)
    }

    @Test func asyncCommandFinishesBeforeTheNextCommandStarts() async throws {
        let release = EventCollector<Void>()
        let done = EventCollector<String>()
        let job = Job.doingInBackground { () async throws in
            done.record("async started")
            _ = await release.values(count: 1)
            done.record("async finished")
        }.doInMain {
            done.record("next")
        }
        _ = await done.values(count: 1)
        release.record(())
        try await job.idle()
        #expect(done.values == ["async started", "async finished", "next"])
    }

    @Test func asyncCommandThatThrowsStopsTheJob() async throws {
        let job = Job.doingInUtility { () async throws in
            await Task.yield()
            throw TestError(name: "async failure")
        }
        await #expect(throws: TestError(name: "async failure")) { try await job.idle() }
        #expect(job.state == .stopped)
    }

    @Test func commandAddedWhileTheChainRunsJoinsTheEndOfIt() async throws {
        let gate = Gate()
        let done = EventCollector<String>()
        let job = Job.doingInBackground {
            done.record("first started")
            gate.wait()
            done.record("first")
        }
        _ = await done.values(count: 1)
        job.doInUtility { done.record("second") }
        job.doInMain { done.record("third") }
        gate.open()
        try await job.idle()
        #expect(done.values == ["first started", "first", "second", "third"])
    }

    @Test func invalidDelayFailsTheCommandWithAClearError() async throws {
        let ran = Counter()
        let job = Job.doingInBackground(delay: -1) { ran.increment() }
        await #expect { try await job.idle() } throws: { error in
            (error as? JobChainError)?.code == .invalidDelay
        }
        #expect(ran.count == 0)
        #expect(job.state == .stopped)
    }
}
