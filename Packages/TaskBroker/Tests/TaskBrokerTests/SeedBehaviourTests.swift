import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

/// YapTaskQueue's own test intents, in our API.
@Suite(.timeLimit(.minutes(3)))
struct SeedBehaviourTests {
    @Test(arguments: Backend.allCases) func oneActionIsHandled(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save(TestAction(key: "only", queueName: "handler1-queue"))
        #expect(await handler.handled.values(count: 1) == ["only"])
        _ = await recorder.wait { $0.isSuccess("only") }
        #expect(try await database.snapshot().isEmpty)
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func tenActionsInOneQueueRunStrictlyInOrder(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        let keys = (0..<10).map { "action\($0)" }
        for key in keys {
            try await database.save(TestAction(key: key, queueName: "handler1-queue"))
        }
        #expect(await handler.handled.values(count: 10) == keys)
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func fiveQueuesRunSideBySideEachInOrder(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        let counts = [5, 10, 15, 20, 25]
        // Interleave the saves so that every queue has work from the start.
        for index in 0..<25 {
            for (queue, count) in counts.enumerated() where index < count {
                try await database.save(TestAction(key: "q\(queue)-\(index)", queueName: "handler1-q\(queue)"))
            }
        }
        let handled = await handler.handled.values(count: counts.reduce(0, +))
        for (queue, count) in counts.enumerated() {
            let ofQueue = handled.filter { $0.hasPrefix("q\(queue)-") }
            #expect(ofQueue == (0..<count).map { "q\(queue)-\($0)" })
        }
        // Side by side: the shortest queue finishes before the longest is half done.
        let lastOfShortest = try #require(handled.firstIndex(of: "q0-4"))
        let halfOfLongest = try #require(handled.firstIndex(of: "q4-12"))
        #expect(lastOfShortest < halfOfLongest)
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func setupRegistersABrokerThatClaimsItsPrefix(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        #expect(broker.name == "handler1")
        #expect(broker.queueName(withSuffix: "queue2") == "handler1-queue2")
        try await database.save(TestAction(key: "elsewhere", queueName: "other-queue"))
        try await database.save(TestAction(key: "mine", queueName: broker.queueName(withSuffix: "queue2")))
        #expect(await handler.handled.values(count: 1) == ["mine"])
        await broker.shutdown()
        #expect(try await database.snapshot().map(\.name) == ["other-queue"])
    }

    @Test(arguments: Backend.allCases) func filterClosureClaimsTheQueuesItAccepts(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler) { queueName in
            queueName.hasSuffix("-mail")
        }
        try await database.save(TestAction(key: "skip", queueName: "handler1-queue"))
        try await database.save(TestAction(key: "take", queueName: "anything-mail"))
        #expect(await handler.handled.values(count: 1) == ["take"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func actionResavedIntoAnotherBrokersQueueReachesThatBroker(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler2 = RecordingHandler<TestAction>()
        let broker2 = try await TaskQueueBroker.setup(database: database, name: "handler2", handler: handler2)
        let queue2 = broker2.queueName(withSuffix: "queue")
        let handler1 = RecordingHandler<TestAction> { action in
            var moved = action
            moved.queueName = queue2
            try? await database.save(moved)
        }
        let broker1 = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler1)
        try await database.save(TestAction(key: "hop", queueName: broker1.queueName(withSuffix: "queue")))
        #expect(await handler1.handled.values(count: 1) == ["hop"])
        #expect(await handler2.handled.values(count: 1) == ["hop"])
        await broker1.shutdown()
        await broker2.shutdown()
    }

    @Test(arguments: Backend.allCases) func failureWithNegativeTimeoutPausesTheQueueUntilRestartQueues(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = CallbackHandler()
        handler.answer("a", success: false, retryTimeout: -1)
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save([TestAction(key: "a", queueName: "handler1-q"), TestAction(key: "b", queueName: "handler1-q")])
        _ = await recorder.wait { $0.isFailure }
        let paused = try #require(try await broker.snapshot().first)
        #expect(paused.pause == .untilRestart)
        #expect(paused.pending == 2)
        #expect(paused.attempts == 1)
        try await broker.restartQueues(["handler1-q"])
        // b waited for a's retry: nothing ran in between.
        #expect(await handler.handled.values(count: 3) == ["a", "a", "b"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func failureWithTimeoutRetriesAfterItThenMovesOn(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ManualClock()
        let handler = CallbackHandler()
        handler.answer("a", success: false, retryTimeout: 5)
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler, clock: clock)
        try await database.save([TestAction(key: "a", queueName: "handler1-q"), TestAction(key: "b", queueName: "handler1-q")])
        await clock.sleepers(atLeast: 1)
        #expect(handler.handled.values == ["a"])
        clock.advance(by: .milliseconds(4_900))
        #expect(clock.sleeperCount == 1)  // the retry timer has not fired
        clock.advance(by: .milliseconds(100))
        #expect(await handler.handled.values(count: 3) == ["a", "a", "b"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func deletingAPausedHeadLetsTheNextActionRun(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        handler.script("a", .waitForRestart)
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save([TestAction(key: "a", queueName: "handler1-q"), TestAction(key: "b", queueName: "handler1-q")])
        _ = await recorder.wait { $0.isFailure }
        #expect(try await database.delete(key: "a", collection: "actions"))
        #expect(await handler.handled.values(count: 2) == ["a", "b"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func deletingAndResavingAPausedActionRunsItWithoutWaitingForTheTimer(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        handler.script("a", .retry(after: .seconds(3600)))
        // The real clock: the retry in an hour never comes within the test's time limit, and the
        // broker's short waits (a claim of its own lease whose row a renewal holds is tried again
        // soon) end as they do for a user.
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save(TestAction(key: "a", queueName: "handler1-q"))
        // Its retry in an hour is stored.
        _ = await recorder.wait { $0.isFailure }
        try await database.delete(key: "a", collection: "actions")
        try await database.save(TestAction(key: "a", queueName: "handler1-q"))
        #expect(await handler.handled.values(count: 2) == ["a", "a"])
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }

    @Test(arguments: Backend.allCases) func resavingAPausedActionAloneAlsoClearsItsTimer(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        handler.script("a", .retry(after: .seconds(3600)))
        // The real clock (see the test above); the failure's event says the pause is stored.
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save(TestAction(key: "a", queueName: "handler1-q"))
        _ = await recorder.wait { $0.isFailure }
        try await database.save(TestAction(key: "a", queueName: "handler1-q"))
        #expect(await handler.handled.values(count: 2) == ["a", "a"])
        await broker.shutdown()
    }
}

@Suite struct TaskResultTests {
    @Test(arguments: [
        (true, -1.0, TaskResult.success),
        (false, 5.0, .retry(after: .seconds(5))),
        (false, 0.0, .retry(after: .zero)),
        (false, -1.0, .waitForRestart),
        (false, .nan, .waitForRestart),
        (false, .infinity, .waitForRestart),
        (false, 1e300, .retry(after: .seconds(3_153_600_000))),
    ])
    func seedPairTranslatesToAResult(success: Bool, retryTimeout: Double, expected: TaskResult) {
        #expect(TaskResult(success: success, retryTimeout: retryTimeout) == expected)
    }
}
