import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

/// `shutdown()` owns the end: it waits for running handlers up to its timeout, then cancels them,
/// stores what had arrived, and returns only when nothing of the broker is left.
@Suite(.timeLimit(.minutes(3)))
struct LifetimeTests {
    @Test func aHandlerThatIgnoresCancellationDoesNotHoldShutdownPastItsTimeout() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        let clock = ManualClock()
        let handler = CancellableGateHandler(stubborn: ["stuck"])
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(shutdownTimeout: .seconds(10)), clock: clock
        )
        let recorder = EventRecorder(broker)
        handler.release("quick")
        try await database.save([TestAction(key: "stuck", queueName: "h-q1"), TestAction(key: "quick", queueName: "h-q2")])
        _ = await recorder.wait { $0.isSuccess("quick") }
        #expect(await handler.started.values(count: 2).contains("stuck"))

        let shutdown = Task { await broker.shutdown() }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(10))
        await shutdown.valueOrCancel
        #expect(handler.cancelled.values == ["stuck"], "the handler was cancelled")
        _ = await recorder.wait { $0 == .stopped }

        // The handler returns only now, after shutdown returned: its outcome is not stored.
        handler.release("stuck")
        try await database.save(TestAction(key: "late", queueName: "h-q2"))
        #expect(handler.started.count == 2, "no handler starts after shutdown returns")
        let reopened = try await TaskDatabase.sqlite(path: path)
        #expect(try await reopened.snapshot().map(\.name) == ["h-q1", "h-q2"])
        #expect(try await reopened.snapshot().first?.attempts == 0, "the abandoned run left nothing behind")
        // Stored outcomes that arrived before the timeout are there; the abandoned action runs again.
        let again = RecordingHandler<TestAction>()
        let second = try await TaskQueueBroker.setup(database: reopened, name: "h", handler: again)
        #expect(Set(await again.handled.values(count: 2)) == ["stuck", "late"])
        await second.shutdown()
    }

    @Test func aHandlerSeesCancellationWhenShutdownRunsOutOfTimeAndItsActionStaysStored() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let clock = ManualClock()
        let handler = CancellableGateHandler()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(shutdownTimeout: .seconds(5)), clock: clock
        )
        try await database.save([TestAction(key: "long", queueName: "h-q"), TestAction(key: "next", queueName: "h-q")])
        _ = await handler.started.values(count: 1)
        let shutdown = Task { await broker.shutdown() }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(5))
        await shutdown.valueOrCancel
        #expect(handler.cancelled.values == ["long"])
        #expect(handler.started.values == ["long"], "nothing new started during the shutdown")
        #expect(try await database.snapshot().withoutSavedTimes == [TaskQueueSnapshot(name: "h-q", pending: 2, attempts: 0)])
    }

    @Test func aBrokerRunAsAServiceRunsInTheCallersTaskAndStopsWithIt() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false)
        )
        let recorder = EventRecorder(broker)
        let running = Task { try await broker.run() }
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        #expect(await handler.handled.values(count: 1) == ["a"])
        running.cancel()
        try await running.valueOrCancel
        _ = await recorder.wait { $0 == .stopped }
        #expect(try await database.snapshot().isEmpty)
    }

    /// Two brokers whose filters overlap: the one that saw the shared queue first owns it, and
    /// the other ignores it. Once the owner shuts down, the other takes the queue. It used to
    /// ignore it for good: later saves to the queue were never run while it was up.
    @Test func aQueueWhoseOwnerShutsDownGoesToAnotherBrokerWhoseFilterAcceptsIt() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let first = RecordingHandler<TestAction>()
        let owner = try await TaskQueueBroker.setup(database: database, name: "first", handler: first) { $0 == "shared" }
        let ownerEvents = EventRecorder(owner)
        try await database.save(TestAction(key: "a", queueName: "shared"))
        #expect(await first.handled.values(count: 1) == ["a"], "the only broker then: it owns the queue")
        // Set the second broker up on an empty store: a stored queue another broker owns makes
        // its setup fail (overlapping filters), which is not what this test is about.
        _ = await ownerEvents.wait { $0.isSuccess("a") }
        let second = RecordingHandler<TestAction>()
        let other = try await TaskQueueBroker.setup(database: database, name: "second", handler: second) {
            $0 == "shared" || $0 == "second-only"
        }
        try await database.save(TestAction(key: "a2", queueName: "shared"))
        #expect(await first.handled.values(count: 2) == ["a", "a2"])
        // Changes reach a broker in commit order: once it ran "b", it had seen "a2" (and ignored it).
        try await database.save(TestAction(key: "b", queueName: "second-only"))
        #expect(await second.handled.values(count: 1) == ["b"])

        await owner.shutdown()
        try await database.save(TestAction(key: "c", queueName: "shared"))
        #expect(await second.handled.values(count: 2) == ["b", "c"])
        await other.shutdown()
        #expect(first.handled.values == ["a", "a2"])
    }
}
