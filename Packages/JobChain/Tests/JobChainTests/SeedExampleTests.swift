import AsyncPrimitivesTesting
import Dispatch
import Foundation
import JobChain
import Testing

/// Every example of the kjob-apple README, compiled and checked for what it promises.
@Suite(.timeLimit(.minutes(1)))
struct SeedExampleTests {
    final class TargetA: Sendable { static let sharedInstance = TargetA() }
    final class TargetB: Sendable { static let sharedInstance = TargetB() }
    final class TargetC: Sendable { static let sharedInstance = TargetC() }
    final class TargetD: Sendable { static let sharedInstance = TargetD() }
    struct EventA { let id = 1 }
    struct EventB { let id = 2 }
    struct EventC {}
    struct EventD {}

    // The seed writes `class MyJob : Job`; Swift 6 asks every subclass of an `@unchecked
    // Sendable` class to restate it (a warning otherwise). Safe: `log` is a Sendable `let`.
    class MyJob: Job, @unchecked Sendable {
        let log = EventCollector<String>()

        init() {
            super.init(mode: .auto)
        }

        override func willStart() { log.record("willStart") }
        override func didStart() { log.record("didStart") }
        override func didFinish() { log.record("didFinish") }
        override func willPause() { log.record("willPause") }
        override func didPause() { log.record("didPause") }
        override func didInterrupt() { log.record("didInterrupt") }
        override func willStop() { log.record("willStop") }
        override func didStop() { log.record("didStop") }
        override func willEject() { log.record("willEject") }
    }

    @Test func staticAndInstanceCommandsBothRunTheirWork() async throws {
        let done = EventCollector<String>()
        let job = Job.doingInBackground {
            done.record("static")
        }
        job.doInBackground {
            done.record("instance")
        }
        try await job.idle()
        #expect(done.values == ["static", "instance"])
    }

    @Test func chainRunsBackgroundThenMainThenUtilityInOrder() async throws {
        MainQueue.prepare()
        let done = EventCollector<String>()
        let job = Job.doingInBackground {
            done.record("background")
        }.doInMain {
            done.record(MainQueue.isCurrent ? "main" : "not main")
        }.doInUtility {
            done.record("utility")
        }
        try await job.idle()
        #expect(done.values == ["background", "main", "utility"])
    }

    @Test func delayedCommandRunsAfterItsDelay() async throws {
        let done = EventCollector<String>()
        let job = Job.doingInBackground(delay: 0.01) {
            done.record("delayed")
        }
        try await job.idle()
        #expect(done.values == ["delayed"])
    }

    @Test func awaitReturnsAfterTheLastCommand() async {
        let order = await onThread { () -> [String] in
            let done = EventCollector<String>()
            let job = Job.doingInBackground {
                done.record("action 1")
            }.doInMain {
                done.record("action 2")
            }.await()
            done.record("after")
            _ = job
            return done.values
        }
        #expect(order == ["action 1", "action 2", "after"])
    }

    @Test func awaitWithSecondsReportsThatTheChainCompleted() async {
        let (waited, order) = await onThread { () -> (Bool, [String]) in
            let done = EventCollector<String>()
            let job = Job(mode: .auto)
            job.doInBackground {
                done.record("action 3")
            }
            job.doInMain {
                done.record("action 4")
            }
            let waited = job.await(10.0)
            return (waited, done.values)
        }
        #expect(waited)
        #expect(order == ["action 3", "action 4"])
    }

    @Test func customQueueRunsTwoJobsCommandsOneAfterTheOther() async throws {
        Job.addQueue(tag: "SEED_CUSTOM_QUEUE_TAG", priority: .background)
        defer { Job.removeQueue(tag: "SEED_CUSTOM_QUEUE_TAG") }
        let gate = Gate()
        let done = EventCollector<String>()
        let job1: Job = Job(mode: .auto)
        let job2: Job = Job(mode: .auto)

        job1.doInCustom("SEED_CUSTOM_QUEUE_TAG") {
            done.record("action 1 started")
            gate.wait()
            done.record("action 1")
        }
        _ = await done.values(count: 1)
        job2.doInCustom("SEED_CUSTOM_QUEUE_TAG") {
            done.record("action 2")
        }
        gate.open()
        try await job1.idle()
        try await job2.idle()
        #expect(done.values == ["action 1 started", "action 1", "action 2"])
    }

    @Test func targetActionsRunOnTheirRegisteredTargets() async throws {
        Job.addTarget(TargetA.sharedInstance)
        Job.addTarget(TargetB.sharedInstance)
        defer {
            Job.removeTarget(TargetA.sharedInstance)
            Job.removeTarget(TargetB.sharedInstance)
        }
        let done = EventCollector<String>()
        let job = Job.doingInBackground { (target: TargetA) in
            done.record(target === TargetA.sharedInstance ? "A" : "other")
        }.doInMain { (target: TargetB) in
            done.record(target === TargetB.sharedInstance ? "B" : "other")
        }
        try await job.idle()
        #expect(done.values == ["A", "B"])
    }

    @Test func targetActionsSkipRemovedAndUnregisteredTargets() async throws {
        Job.addTarget(TargetC.sharedInstance)
        let done = EventCollector<String>()

        // this action will be executed because we added target C
        let job = Job.doingInBackground { (_: TargetC) in
            done.record("C before removal")
        }

        Job.removeTarget(TargetC.sharedInstance)

        // this action will not be executed because we removed target C
        job.doInMain { (_: TargetC) in
            done.record("C after removal")
        }

        // this action will not be executed because we did not add target D
        job.doInBackground { (_: TargetD) in
            done.record("D")
        }
        job.doInBackground {
            done.record("end")
        }
        try await job.idle()
        #expect(done.values == ["C before removal", "end"])
    }

    @Test func eventActionsRunForPostedEvents() async throws {
        let done = EventCollector<String>()
        let actionA = Action({ (event: EventA) -> Void in
            done.record("A\(event.id)")
        })
        let actionB = Action({ (event: EventB) -> Void in
            done.record("B\(event.id)")
        })
        Job.addAction(actionA)
        Job.addAction(actionB)
        defer {
            Job.removeAction(actionA)
            Job.removeAction(actionB)
        }

        let job = Job.postingInBackground(event: EventA())
            .postInMain(event: EventB())
        try await job.idle()
        #expect(done.values == ["A1", "B2"])
    }

    @Test func eventActionsSkipRemovedAndUnregisteredEvents() async throws {
        let done = EventCollector<String>()
        let action = Action({ (_: EventC) -> Void in
            done.record("C")
        })
        Job.addAction(action)

        // action for this event will be executed because we added action for event C
        let job = Job.postingInBackground(event: EventC())

        Job.removeAction(action)

        // action for this event will not be executed because we removed action for event C
        job.postInMain(event: EventC())

        // action for this event will not be executed because we did not add action for event D
        job.postInBackground(event: EventD())
        job.doInBackground { done.record("end") }
        try await job.idle()
        #expect(done.values == ["C", "end"])
    }

    @Test func subclassCallbacksFollowTheLifecycle() async throws {
        let job = MyJob()
        #expect(job.state == .paused)
        job.doInBackground {}
        try await job.idle()
        #expect(await job.log.values(count: 5) == ["willStart", "didStart", "didFinish", "willPause", "didPause"])
        #expect(job.state == .paused)
    }

    @Test func autoJobStartsPausedAndManualJobStartsStopped() {
        let autoJob = Job(mode: .auto)
        let manualJob = Job(mode: .manual)
        #expect(autoJob.state == .paused)
        #expect(manualJob.state == .stopped)
    }

    @Test func manualJobRunsOnlyAfterResume() async throws {
        let ran = Counter()
        let manualJob = Job(mode: .manual)
        manualJob.doInBackground {
            ran.increment()
        }
        try await manualJob.idle()
        #expect(ran.count == 0)
        #expect(manualJob.state == .stopped)

        manualJob.resume()
        try await manualJob.idle()
        #expect(ran.count == 1)
        #expect(manualJob.state == .paused)
    }

    @Test func failedCommandIsExposedByErrorAndRetriedByResume() async throws {
        let attempts = Counter()
        let job = Job.doingInBackground {
            if attempts.increment() == 1 { throw TestError(name: "first try") }
        }
        await #expect(throws: TestError(name: "first try")) { try await job.idle() }
        let error: (any Error)? = job.error()
        #expect(error as? TestError == TestError(name: "first try"))
        #expect(job.state == .stopped)

        job.resume()
        try await job.idle()
        #expect(attempts.count == 2)
        #expect(job.error() == nil)
        #expect(job.state == .paused)
    }

    @Test func cancelDropsTheCommandsOfAStoppedJob() async throws {
        let ran = Counter()
        let job = Job.doingInBackground {
            throw TestError(name: "fails")
        }.doInBackground {
            ran.increment()
        }
        await #expect(throws: TestError.self) { try await job.idle() }
        job.cancel()
        job.resume()
        try await job.idle()
        #expect(ran.count == 0)
        #expect(job.state == .paused)
    }

    @Test func suspendingAPausedJobStopsIt() async throws {
        let ran = Counter()
        let job = Job(mode: .auto)
        job.suspend()
        #expect(job.state == .stopped)
        job.doInBackground { ran.increment() }
        try await job.idle()
        #expect(ran.count == 0)
        job.resume()
        try await job.idle()
        #expect(ran.count == 1)
    }
}
