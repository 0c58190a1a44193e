import AsyncPrimitivesTesting
import JobChain
import Testing

@Suite(.timeLimit(.minutes(1)))
struct DelayTests {
    @Test func delayCountsFromWhenThePreviousCommandFinished() async throws {
        let clock = ManualClock()
        let gate = Gate()
        let done = EventCollector<String>()
        let job = Job(mode: .auto, clock: clock)
        job.doInBackground {
            done.record("first started")
            gate.wait()
            done.record("first finished")
        }.doInBackground(delay: 2.0) {
            done.record("delayed")
        }
        _ = await done.values(count: 1)
        // Time passing while the first command runs does not count toward the delay.
        clock.advance(by: .seconds(5))
        #expect(clock.sleeperCount == 0)
        gate.open()
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(1_999))
        #expect(clock.sleeperCount == 1)
        #expect(done.values == ["first started", "first finished"])
        clock.advance(by: .milliseconds(1))
        try await job.idle()
        #expect(done.values == ["first started", "first finished", "delayed"])
    }

    @Test func firstCommandDelayCountsFromWhenItWasAdded() async throws {
        let clock = ManualClock()
        let done = EventCollector<String>()
        let job = Job(mode: .auto, clock: clock).doInMain(delay: 1.5) {
            done.record("delayed")
        }
        await clock.sleepers(atLeast: 1)
        #expect(job.state == .started)
        clock.advance(by: .seconds(1.5))
        try await job.idle()
        #expect(done.values == ["delayed"])
    }

    @Test func suspendDuringADelayStopsAtOnceAndResumeWaitsTheWholeDelayAgain() async throws {
        let clock = ManualClock()
        let callbacks = EventCollector<String>()
        let done = EventCollector<String>()
        let job = RecordingJob(mode: .auto, clock: clock, callbacks: callbacks)
        job.doInBackground(delay: 3) { done.record("delayed") }
        await clock.sleepers(atLeast: 1)
        job.suspend()
        #expect(job.state == .stopped)
        #expect(clock.sleeperCount == 0)
        clock.advance(by: .seconds(10))
        #expect(done.count == 0)

        job.resume()
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(2))
        #expect(done.count == 0)
        clock.advance(by: .seconds(1))
        try await job.idle()
        #expect(done.values == ["delayed"])
        #expect(callbacks.values == [
            "willStart", "didStart", "didInterrupt", "willStop", "didStop",
            "willStart", "didStart", "didFinish", "willPause", "didPause",
        ])
    }

    @Test func cancelDuringADelayDropsTheCommand() async throws {
        let clock = ManualClock()
        let done = EventCollector<String>()
        let job = Job(mode: .auto, clock: clock)
        job.doInBackground(delay: 3) { done.record("delayed") }
            .doInBackground { done.record("after") }
        await clock.sleepers(atLeast: 1)
        job.cancel()
        try await job.idle()
        #expect(job.state == .paused)
        clock.advance(by: .seconds(3))
        job.doInBackground { done.record("new") }
        try await job.idle()
        #expect(done.values == ["new"])
    }
}
