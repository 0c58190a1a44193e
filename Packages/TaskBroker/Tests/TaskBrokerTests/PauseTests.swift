import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

/// `pauseQueues` and `resumeQueues` as an operator uses them: a paused queue finishes the action it
/// runs, starts nothing more, in every process and across restarts, keeps what is saved into it,
/// and runs again once resumed; other queues go on.
@Suite(.timeLimit(.minutes(3)))
struct PauseTests {
    @Test(arguments: Backend.allCases) func aPausedQueueFinishesItsRunStartsNothingAcrossRestartsAndRunsOnceResumed(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = HoldingHandler(holding: "a1")
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let events = EventRecorder(broker)
        broker.start()
        try await database.save([TestAction(key: "a1", queueName: "h-a"), TestAction(key: "a2", queueName: "h-a")])
        #expect(await handler.runs.values(count: 1) == ["a1"])

        try await database.pauseQueues(["h-a"])
        _ = await events.wait { $0 == .paused(queueName: "h-a") }
        handler.release()
        _ = await events.wait { $0.isSuccess("a1") }
        try await database.save([TestAction(key: "a3", queueName: "h-a"), TestAction(key: "b1", queueName: "h-b")])
        _ = await events.wait { $0.isSuccess("b1") }
        #expect(handler.runs.values == ["a1", "b1"], "the paused queue started nothing; another queue went on")
        let paused = try #require(try await database.snapshot().first { $0.name == "h-a" })
        #expect(paused.pausedByOperator && paused.pause == nil && paused.pending == 2, "\(paused)")
        await broker.shutdown()

        // A new broker (a restart) finds the queue paused.
        let again = HoldingHandler(holding: nil)
        let broker2 = try await TaskQueueBroker.setup(
            database: try await store.open(), name: "h", handler: again, configuration: .init(startsAutomatically: false)
        )
        let events2 = EventRecorder(broker2)
        broker2.start()
        _ = await events2.wait { $0 == .paused(queueName: "h-a") }
        try await database.save(TestAction(key: "b2", queueName: "h-b"))
        _ = await events2.wait { $0.isSuccess("b2") }
        #expect(again.runs.values == ["b2"])

        try await database.resumeQueues(["h-a"])
        _ = await events2.wait { $0 == .resumed(queueName: "h-a") }
        #expect(await again.runs.values(count: 3) == ["b2", "a2", "a3"])
        _ = await events2.wait { $0.isSuccess("a3") }
        #expect(try await database.snapshot().isEmpty, "nothing is left, and no queue is paused")
        await broker2.shutdown()
    }

    /// A queue with no actions may be paused: what is saved into it later waits.
    @Test(arguments: Backend.allCases) func aQueueWithoutActionsMayBePausedAhead(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.pauseQueues(["h-later"])
        #expect(try await database.snapshot().map(\.name) == ["h-later"])
        let handler = HoldingHandler(holding: nil)
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false))
        let events = EventRecorder(broker)
        broker.start()
        try await database.save([TestAction(key: "x", queueName: "h-later"), TestAction(key: "y", queueName: "h-now")])
        _ = await events.wait { $0.isSuccess("y") }
        _ = await events.wait { $0 == .paused(queueName: "h-later") }
        #expect(handler.runs.values == ["y"])
        try await database.resumeQueues(["h-later"])
        #expect(await handler.runs.values(count: 2) == ["y", "x"])
        await broker.shutdown()
    }

    /// Found by the model test: a timed retry that came due while an operator held its queue was
    /// reported `.resumed` twice: once when its timer fired, and again when the operator's resume
    /// read the queue and armed the timer of its stored (already due) pause anew.
    @Test func aTimedRetryDueWhileItsQueueIsPausedIsReportedResumedOnce() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let clock = ObservedClock()
        let start = Date()
        let handler = RecordingHandler<TestAction>()
        handler.script("k", .retry(after: .seconds(1)))
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler,
            configuration: .init(wallClock: { start.addingTimeInterval(Double(clock.now.offset.components.seconds)) }, startsAutomatically: false),
            clock: clock
        )
        let events = EventRecorder(broker)
        broker.start()
        try await database.save(TestAction(key: "k", queueName: "h-q"))
        _ = await events.wait { $0.isFailure }
        try await database.pauseQueues(["h-q"])
        _ = await events.wait { $0 == .paused(queueName: "h-q") }
        let due = clock.now.advanced(by: .seconds(1))
        try #require(await clock.sleepers { $0[due] != nil }, "the retry's timer sleeps until \(due): \(clock.sleepers)")
        clock.advance(by: .seconds(1))
        _ = await events.wait { $0 == .resumed(queueName: "h-q") }
        #expect(handler.handled.values == ["k"], "the paused queue does not run its due retry")

        try await database.resumeQueues(["h-q"])
        let all = await events.wait { $0.isSuccess("k") }
        let kinds = all.map { event -> String in
            switch event {
            case .started: "started"
            case .failed: "failed"
            case .paused: "paused"
            case .resumed: "resumed"
            case .succeeded: "succeeded"
            default: "other"
            }
        }
        #expect(kinds == ["started", "failed", "paused", "resumed", "resumed", "started", "succeeded"])
        await broker.shutdown()
    }
}
