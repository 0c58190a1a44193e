import AsyncPrimitivesTesting
import Dispatch
import JobChain
import Testing

@Suite(.timeLimit(.minutes(1)))
struct AwaitTests {
    @Test func awaitReturnsAtOnceWhenNothingIsQueued() async {
        let waited = await onThread { () -> Bool in
            let job = Job(mode: .auto)
            job.await()
            return job.await(0)
        }
        #expect(waited)
    }

    @Test func awaitWithSecondsReturnsFalseWhenTheChainIsNotDoneInTime() async {
        let clock = ManualClock()
        let gate = Gate()
        let started = EventCollector<Void>()
        let job = Job(mode: .auto, clock: clock).doInBackground {
            started.record(())
            gate.wait()
        }
        _ = await started.values(count: 1)
        async let waited = onThread { job.await(10.0) }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(10))
        #expect(await waited == false)
        gate.open()
        try? await job.idle()
    }

    @Test func waitUntilIdleThrowsTimedOutWhenTheChainIsNotDoneInTime() async {
        let clock = ManualClock()
        let gate = Gate()
        let started = EventCollector<Void>()
        let job = Job(mode: .auto, clock: clock).doInBackground {
            started.record(())
            gate.wait()
        }
        _ = await started.values(count: 1)
        async let outcome = onThread { () -> JobChainError.Code? in
            do {
                try job.waitUntilIdle(timeout: 1)
                return nil
            } catch {
                return (error as? JobChainError)?.code
            }
        }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        #expect(await outcome == .timedOut)
        gate.open()
        try? await job.idle()
    }

    @Test func awaitWithSecondsReturnsFalseWhenTheJobStoppedWithCommandsLeft() async {
        let waited = await onThread { () -> Bool in
            let job = Job.doingInBackground { throw TestError(name: "stop") }
            return job.await(30)
        }
        #expect(waited == false)
    }

    @Test func awaitOnTheMainQueueWithAMainCommandPendingFailsInsteadOfDeadlocking() async throws {
        let gate = Gate()
        let done = EventCollector<String>()
        let job = Job.doingInBackground {
            gate.wait()
            done.record("background")
        }.doInMain {
            done.record("main")
        }
        let (code, waited) = await onMainQueue { () -> (JobChainError.Code?, Bool) in
            var code: JobChainError.Code?
            do {
                try job.waitUntilIdle()
            } catch {
                code = (error as? JobChainError)?.code
            }
            job.await()
            return (code, job.await(60))
        }
        #expect(code == .wouldDeadlock)
        #expect(waited == false)
        gate.open()
        try await job.idle()
        #expect(done.values == ["background", "main"])
    }

    @Test func awaitOnTheMainQueueWithoutMainCommandsWaits() async {
        let waited = await onMainQueue { () -> Bool in
            Job.doingInBackground {}.doInUtility {}.await(60)
        }
        #expect(waited)
    }

    @Test @MainActor func idleOnTheMainActorWaitsForMainCommands() async throws {
        let done = EventCollector<String>()
        let job = Job.doingInMain { done.record("main") }
        try await job.idle()
        #expect(done.values == ["main"])
    }

    @Test func idleReturnsAtOnceWhenNothingIsQueued() async throws {
        let auto = Job(mode: .auto)
        let manual = Job(mode: .manual)
        let before = (auto.state, manual.state)
        try await auto.idle()
        try await manual.idle()
        // Waiting neither started nor stopped a job that had nothing to do.
        #expect(auto.state == before.0)
        #expect(manual.state == before.1)
        #expect(auto.error() == nil)
        #expect(manual.error() == nil)
    }

    @Test func idleThrowsCancellationErrorWhenItsTaskIsCancelled() async {
        let gate = Gate()
        let started = EventCollector<Void>()
        let job = Job.doingInBackground {
            started.record(())
            gate.wait()
        }
        _ = await started.values(count: 1)
        let waiter = Task { try await job.idle() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        gate.open()
        try? await job.idle()
    }

    @Test func waitUntilIdleRethrowsTheFailedCommandsError() async {
        let thrown = await onThread { () -> TestError? in
            let job = Job.doingInUtility { throw TestError(name: "boom") }
            do {
                try job.waitUntilIdle()
                return nil
            } catch {
                return error as? TestError
            }
        }
        #expect(thrown == TestError(name: "boom"))
    }
}
