import AsyncPrimitivesTesting
import JobChain
import Testing

@Suite(.timeLimit(.minutes(1)))
struct TargetAndEventTests {
    final class Screen: Sendable {
        let name: String
        init(name: String) { self.name = name }
    }

    final class Freed: Sendable {}
    final class Lonely: Sendable {}
    struct Tapped: Sendable { let count: Int }
    struct Ignored: Sendable {}
    struct Failing: Sendable {}

    @Test func commandTypedByATargetRunsWithEachRegisteredTargetOfThatType() async throws {
        let first = Screen(name: "first")
        let second = Screen(name: "second")
        Job.addTarget(first)
        Job.addTarget(second)
        Job.addTarget(first)
        defer {
            Job.removeTarget(first)
            Job.removeTarget(second)
        }
        let done = EventCollector<String>()
        let job = Job.doingInUtility { (screen: Screen) in done.record(screen.name) }
        try await job.idle()
        #expect(done.values == ["first", "second"])
    }

    @Test func targetsAreHeldWeaklyAndAFreedTargetIsSkipped() async throws {
        let done = EventCollector<String>()
        let job = Job(mode: .manual)
        do {
            let target = Freed()
            Job.addTarget(target)
            job.doInBackground { (_: Freed) in done.record("ran on freed target") }
        }
        job.doInBackground { done.record("end") }
        job.resume()
        try await job.idle()
        #expect(done.values == ["end"])
    }

    @Test func commandTypedByAnUnregisteredTargetDoesNothing() async throws {
        let done = EventCollector<String>()
        let job = Job.doingInMain { (_: Lonely) in done.record("lonely") }.doInMain { done.record("end") }
        try await job.idle()
        #expect(done.values == ["end"])
    }

    @Test func everyActionRegisteredForAnEventTypeRunsAndRemovedOnesStop() async throws {
        let done = EventCollector<String>()
        let first = Action { (event: Tapped) in done.record("first \(event.count)") }
        let second = Action { (event: Tapped) in done.record("second \(event.count)") }
        let other = Action { (_: Ignored) in done.record("other") }
        Job.addAction(first)
        Job.addAction(second)
        Job.addAction(other)
        defer {
            Job.removeAction(first)
            Job.removeAction(second)
            Job.removeAction(other)
        }
        let job = Job.postingInUtility(event: Tapped(count: 1))
        try await job.idle()
        #expect(done.values == ["first 1", "second 1"])

        Job.removeAction(first)
        job.postInCustom("no-such-tag-for-events", event: Tapped(count: 2))
        await #expect(throws: JobChainError.self) { try await job.idle() }
        job.cancel()
        job.postInBackground(event: Tapped(count: 3))
        job.resume()
        try await job.idle()
        #expect(done.values == ["first 1", "second 1", "second 3"])
    }

    @Test func actionThatThrowsStopsThePostingJob() async throws {
        let action = Action { (_: Failing) in throw TestError(name: "action failed") }
        Job.addAction(action)
        defer { Job.removeAction(action) }
        let job = Job.postingInMain(event: Failing())
        await #expect(throws: TestError(name: "action failed")) { try await job.idle() }
        #expect(job.state == .stopped)
    }
}
