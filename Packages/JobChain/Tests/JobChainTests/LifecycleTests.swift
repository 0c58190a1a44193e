import AsyncPrimitivesTesting
import JobChain
import Testing

@Suite(.timeLimit(.minutes(1)))
struct LifecycleTests {
    @Test func autoJobRunsCommandsWithTheSeedsCallbackOrder() async throws {
        // The first command waits until the second is chained: an auto job whose only command
        // finished before the next was added pauses in between, which is another order.
        let gate = Gate()
        let job = RecordingJob(mode: .auto)
        job.doInBackground { gate.wait() }.doInUtility {}
        gate.open()
        try await job.idle()
        #expect(await job.callbacks.values(count: 8) == [
            "willStart", "didStart", "didFinish",
            "willStart", "didStart", "didFinish",
            "willPause", "didPause",
        ])
        #expect(job.state == .paused)
    }

    @Test func onceIdleReturnsTheStateIsPausedAndEveryCallbackHasRun() async throws {
        // The seed's reader checks the state right after waiting; the worker that finished the
        // last command must not still be publishing it. Repeated, because it was a race.
        for _ in 0..<300 {
            let job = RecordingJob(mode: .auto)
            job.doInBackground {}
            try await job.idle()
            #expect(job.state == .paused)
            #expect(job.callbacks.values.suffix(2) == ["willPause", "didPause"])
        }
    }

    @Test func onceAwaitReturnsTheStateIsPaused() {
        for _ in 0..<300 {
            let job = Job.doingInBackground {}.await()
            #expect(job.state == .paused)
        }
    }

    @Test func suspendingAJobThatWentIdleStopsItAtOnce() async throws {
        // "If job was paused before suspending, job state just changes to Stopped."
        for _ in 0..<300 {
            let job = Job(mode: .auto)
            job.doInBackground {}
            try await job.idle()
            job.suspend()
            #expect(job.state == .stopped)
        }
    }

    @Test func statesSeenByCallbacksAndCommandsFollowTheLifecycle() async throws {
        let states = EventCollector<Job.State>()
        final class StateJob: Job, @unchecked Sendable {
            // Restated as Swift 6 asks; safe: its one stored property is a Sendable `let`.
            let states: EventCollector<Job.State>
            init(states: EventCollector<Job.State>) {
                self.states = states
                super.init(mode: .manual)
            }
            override func didStart() { states.record(state) }
            override func didFinish() { states.record(state) }
            override func didPause() { states.record(state) }
            override func didStop() { states.record(state) }
        }
        let job = StateJob(states: states)
        #expect(job.state == .stopped)
        job.doInBackground { [job] in states.record(job.state) }
        job.resume()
        try await job.idle()
        job.suspend()
        #expect(await states.values(count: 5) == [.started, .started, .finished, .paused, .stopped])
    }

    @Test func failedCommandStopsTheJobStaysFirstAndResumeRetriesIt() async throws {
        let attempts = Counter()
        let done = EventCollector<String>()
        let job = RecordingJob(mode: .auto)
        job.doInBackground {
            if attempts.increment() < 3 { throw TestError(name: "attempt \(attempts.count)") }
            done.record("flaky")
        }.doInMain {
            done.record("next")
        }
        await #expect(throws: TestError(name: "attempt 1")) { try await job.idle() }
        #expect(job.state == .stopped)
        #expect(done.count == 0)

        job.resume()
        await #expect(throws: TestError(name: "attempt 2")) { try await job.idle() }
        #expect((job.error() as? TestError)?.name == "attempt 2")

        job.resume()
        try await job.idle()
        #expect(done.values == ["flaky", "next"])
        #expect(job.error() == nil)
        #expect(await job.callbacks.values(count: 16) == [
            "willStart", "didStart", "willStop", "didStop",
            "willStart", "didStart", "willStop", "didStop",
            "willStart", "didStart", "didFinish",
            "willStart", "didStart", "didFinish",
            "willPause", "didPause",
        ])
    }

    @Test func cancelOnAJobStoppedByAFailureDropsTheCommandAndItsError() async throws {
        let ran = EventCollector<String>()
        let job = Job(mode: .auto)
        job.doInBackground {
            throw TestError(name: "failed")
        }.doInBackground {
            ran.record("next")
        }
        await #expect(throws: TestError(name: "failed")) { try await job.idle() }
        job.cancel()
        #expect(job.error() == nil)
        try await job.idle()
        #expect(job.state == .stopped)
        // Resumed, it runs what it is given next, not the dropped commands.
        job.doInBackground { ran.record("new") }
        job.resume()
        try await job.idle()
        #expect(ran.values == ["new"])
        #expect(job.error() == nil)
    }

    @Test func suspendWhileACommandRunsInterruptsThenStopsAfterItAndRunsNothingMore() async throws {
        let gate = Gate()
        let done = EventCollector<String>()
        let job = RecordingJob(mode: .auto)
        job.doInBackground {
            done.record("running")
            gate.wait()
            done.record("first")
        }.doInBackground {
            done.record("second")
        }
        _ = await done.values(count: 1)
        job.suspend()
        #expect(job.state == .interrupted)
        gate.open()
        try await job.idle()
        #expect(job.state == .stopped)
        #expect(done.values == ["running", "first"])
        #expect(job.callbacks.values == ["willStart", "didStart", "didInterrupt", "willStop", "didStop"])

        job.resume()
        try await job.idle()
        #expect(done.values == ["running", "first", "second"])
        #expect(job.state == .paused)
    }

    @Test func failedCommandDuringAnInterruptionStaysFirst() async throws {
        let gate = Gate()
        let attempts = Counter()
        let started = EventCollector<Void>()
        let job = Job.doingInBackground {
            started.record(())
            if attempts.increment() == 1 {
                gate.wait()
                throw TestError(name: "interrupted failure")
            }
        }
        _ = await started.values(count: 1)
        job.suspend()
        gate.open()
        await #expect(throws: TestError(name: "interrupted failure")) { try await job.idle() }
        job.resume()
        try await job.idle()
        #expect(attempts.count == 2)
    }

    @Test func resumingAnInterruptedJobCarriesOnWithTheChain() async throws {
        let gate = Gate()
        let done = EventCollector<String>()
        let job = Job.doingInBackground {
            done.record("first")
            gate.wait()
        }.doInBackground {
            done.record("second")
        }
        _ = await done.values(count: 1)
        job.suspend()
        job.resume()
        #expect(job.state == .started)
        gate.open()
        try await job.idle()
        #expect(done.values == ["first", "second"])
    }

    @Test func cancelDropsEveryPendingCommandAndLetsTheRunningOneFinish() async throws {
        let gate = Gate()
        let done = EventCollector<String>()
        let job = Job.doingInBackground {
            done.record("running")
            gate.wait()
            done.record("finished")
        }
        for index in 0..<10 {
            job.doInMain { done.record("pending \(index)") }
        }
        _ = await done.values(count: 1)
        job.cancel()
        gate.open()
        try await job.idle()
        #expect(done.values == ["running", "finished"])
        #expect(job.state == .paused)

        job.doInUtility { done.record("after cancel") }
        try await job.idle()
        #expect(done.values == ["running", "finished", "after cancel"])
    }

    @Test func manualJobCollectsCommandsUntilResume() async throws {
        let done = EventCollector<Int>()
        let job = Job(mode: .manual)
        for index in 0..<5 { job.doInUtility { done.record(index) } }
        #expect(job.state == .stopped)
        try await job.idle()
        #expect(done.count == 0)
        job.resume()
        try await job.idle()
        #expect(done.values == [0, 1, 2, 3, 4])
    }

    @Test func resumingAStoppedJobWithoutCommandsPausesIt() {
        let job = RecordingJob(mode: .manual)
        job.resume()
        #expect(job.state == .paused)
        #expect(job.callbacks.values == ["willPause", "didPause"])
    }

    @Test func fireAndForgetJobRunsToTheEndAndIsThenFreed() async {
        let callbacks = EventCollector<String>()
        let done = EventCollector<String>()
        // As above: the first command waits until the chain is built, or the job may pause in between.
        let gate = Gate()
        RecordingJob(mode: .auto, callbacks: callbacks)
            .doInBackground {
                gate.wait()
                done.record("one")
            }
            .doInMain { done.record("two") }
            .doInUtility { done.record("three") }
        gate.open()
        #expect(await callbacks.values(count: 12).last == "willEject")
        #expect(done.values == ["one", "two", "three"])
    }

    @Test func staticCommandWithNoReferenceKeptStillRuns() async {
        let done = EventCollector<String>()
        Job.doingInBackground { done.record("one") }.doInMain { done.record("two") }
        #expect(await done.values(count: 2) == ["one", "two"])
    }
}
