import AsyncPrimitivesTesting
import Foundation
import GRDB
import ServiceLifecycle
import Logging
import TaskBroker
import Testing

/// Where TaskBroker goes past YapTaskQueue.
@Suite(.timeLimit(.minutes(3)))
struct BeyondSeedTests {
    @Test(arguments: Backend.allCases) func zeroRetryTimeoutRetriesAtOnce(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = CallbackHandler()
        handler.answer("a", success: false, retryTimeout: 0)
        handler.answer("a", success: false, retryTimeout: 0)
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        #expect(await handler.handled.values(count: 4) == ["a", "a", "a", "b"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func storedActionsStartWithoutAnyNewWrite(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        do {
            let database = try await store.open()
            try await database.save((0..<5).map { TestAction(key: "k\($0)", queueName: "h-q") })
        }
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        #expect(await handler.handled.values(count: 5) == (0..<5).map { "k\($0)" })
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func restartedBrokerKeepsAPausedQueuePaused(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let first = RecordingHandler<TestAction>()
        first.script("a", .waitForRestart)
        let broker1 = try await TaskQueueBroker.setup(database: database, name: "h", handler: first)
        let recorder1 = EventRecorder(broker1)
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        _ = await recorder1.wait { $0.isFailure }
        await broker1.shutdown()

        let reopened = try await store.open()
        let second = RecordingHandler<TestAction>()
        let broker2 = try await TaskQueueBroker.setup(database: reopened, name: "h", handler: second)
        let recorder2 = EventRecorder(broker2)
        // Another queue runs; the paused one does not.
        try await reopened.save(TestAction(key: "other", queueName: "h-other"))
        #expect(await second.handled.values(count: 1) == ["other"])
        let paused = try #require(try await broker2.snapshot().first { $0.name == "h-q" })
        #expect(paused.pause == .untilRestart)
        #expect(paused.attempts == 1)
        try await broker2.restartQueues(["h-q"])
        #expect(await second.handled.values(count: 3) == ["other", "a", "b"])
        let events = await recorder2.wait { $0.isSuccess("b") }
        #expect(events.contains(.started(queueName: "h-q", key: "a", collection: "actions", attempt: 2)))
        await broker2.shutdown()
    }

    @Test(arguments: Backend.allCases) func timedRetryWaitsOnlyItsRemainingTimeAfterARestart(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let database = try await store.open()
        let clock1 = ManualClock()
        let first = RecordingHandler<TestAction>()
        first.script("a", .retry(after: .seconds(10)))
        let broker1 = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: first,
            configuration: .init(wallClock: { start }), clock: clock1
        )
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        await clock1.sleepers(atLeast: 1)
        #expect(try await database.snapshot().first?.pausedUntil == start.addingTimeInterval(10))
        await broker1.shutdown()

        // Seven seconds later (wall clock) a new broker starts: three seconds are left.
        let clock2 = ManualClock()
        let second = RecordingHandler<TestAction>()
        let broker2 = try await TaskQueueBroker.setup(
            database: try await store.open(), name: "h", handler: second,
            configuration: .init(wallClock: { start.addingTimeInterval(7) }), clock: clock2
        )
        await clock2.sleepers(atLeast: 1)
        clock2.advance(by: .milliseconds(2_900))
        #expect(clock2.sleeperCount == 1)
        #expect(second.handled.count == 0)
        clock2.advance(by: .milliseconds(100))
        #expect(await second.handled.values(count: 1) == ["a"])
        await broker2.shutdown()
    }

    /// A retry due in 100 ms runs once the clock has moved exactly 100 ms, in the broker that
    /// failed it and in one that reads the deadline back from storage. (A deadline is a date, and
    /// a date with a fraction of a second does not subtract back to exactly 100 ms: the wait came
    /// out a few hundred nanoseconds long, and a clock advanced by exactly the retry never fired it.)
    @Test(arguments: Backend.allCases) func aTimedRetryRunsWhenTheClockReachesItsDeadlineExactly(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let start = Date(timeIntervalSince1970: 1_800_000_000.123_456_7)
        let database = try await store.open()
        let clock1 = ManualClock()
        let first = RecordingHandler<TestAction>()
        first.script("a", .retry(after: .milliseconds(100)))
        first.script("b", .retry(after: .milliseconds(100)), .retry(after: .milliseconds(100)))
        let broker1 = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: first, configuration: .init(wallClock: { start }), clock: clock1
        )
        try await database.save([TestAction(key: "a", queueName: "h-a"), TestAction(key: "b", queueName: "h-b")])
        await clock1.sleepers(atLeast: 2)
        clock1.advance(by: .milliseconds(100))
        #expect(await first.handled.values(count: 4).sorted() == ["a", "a", "b", "b"])
        await broker1.shutdown()

        // A's second run succeeded; b's failed again and is paused until 200 ms after the start.
        let paused = try #require(try await database.snapshot().first)
        #expect(paused.name == "h-b")
        let clock2 = ManualClock()
        let second = RecordingHandler<TestAction>()
        let broker2 = try await TaskQueueBroker.setup(
            database: try await store.open(), name: "h", handler: second,
            configuration: .init(wallClock: { start.addingTimeInterval(0.1) }), clock: clock2
        )
        await clock2.sleepers(atLeast: 1)
        clock2.advance(by: .milliseconds(99))
        #expect(second.handled.count == 0)
        clock2.advance(by: .milliseconds(1))
        #expect(await second.handled.values(count: 1) == ["b"])
        await broker2.shutdown()
    }

    @Test(arguments: Backend.allCases) func overdueTimedRetryRunsAtOnceAfterARestart(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let database = try await store.open()
        let clock = ManualClock()
        let first = RecordingHandler<TestAction>()
        first.script("a", .retry(after: .seconds(10)))
        let broker1 = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: first, configuration: .init(wallClock: { start }), clock: clock
        )
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        await clock.sleepers(atLeast: 1)
        await broker1.shutdown()
        let second = RecordingHandler<TestAction>()
        let broker2 = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: second,
            configuration: .init(wallClock: { start.addingTimeInterval(60) }), clock: ManualClock()
        )
        #expect(await second.handled.values(count: 1) == ["a"])
        await broker2.shutdown()
    }

    @Test func twoBrokersClaimingTheSameQueueFailAtSetup() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let database = try await TaskDatabase.sqlite(path: path)
        try await database.save(TestAction(key: "a", queueName: "mail-1"))
        let gate = GateHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "mail", handler: gate)
        #expect(await gate.started.values(count: 1) == ["a"])

        // The same name, even through another TaskDatabase on the same file.
        let sameFile = try await TaskDatabase.sqlite(path: path)
        let sameName = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskQueueBroker.setup(database: sameFile, name: "mail", handler: GateHandler())
        }
        #expect(sameName?.code == .queueAlreadyClaimed)
        // An overlapping prefix.
        let overlap = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskQueueBroker.setup(database: database, name: "mail-1", handler: GateHandler())
        }
        #expect(overlap?.code == .queueAlreadyClaimed)
        // A filter that accepts a stored queue the first broker owns.
        let filter = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskQueueBroker.setup(database: database, name: "other", handler: GateHandler()) { _ in true }
        }
        #expect(filter?.code == .queueAlreadyClaimed)
        // An empty prefix.
        let empty = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskQueueBroker.setup(database: database, name: "", handler: GateHandler())
        }
        #expect(empty?.code == .invalidName)

        gate.release("a")
        await broker.shutdown()
        // Once shut down, the name is free again.
        let again = try await TaskQueueBroker.setup(database: sameFile, name: "mail", handler: RecordingHandler<TestAction>())
        await again.shutdown()
    }

    @Test(arguments: Backend.allCases) func atMostOneActionPerQueueIsInFlightEvenWhenTheHeadIsDeletedMidRun(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = GateHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        #expect(await handler.started.values(count: 1) == ["a"])
        try await database.delete(key: "a", collection: "actions")
        // Round-trip a change through the broker: by the time "probe" starts, the delete was applied.
        handler.release("probe")
        try await database.save(TestAction(key: "probe", queueName: "h-other"))
        #expect(await handler.started.values(count: 2) == ["a", "probe"])
        #expect(try #require(try await broker.snapshot().first { $0.name == "h-q" }).inFlight == "a")
        handler.release("a")
        handler.release("b")
        #expect(await handler.started.values(count: 3) == ["a", "probe", "b"])
        let events = await recorder.wait { $0.isSuccess("b") }
        #expect(events.contains(.discarded(queueName: "h-q", key: "a", collection: "actions")))
        #expect(!events.contains(.succeeded(queueName: "h-q", key: "a", collection: "actions")))
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func inFlightActionThatFailsAfterItsDeletionDoesNotPauseItsQueue(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let gate = GateHandler()
        let handler = RecordingHandler<TestAction> { action in
            _ = await gate.handle(action, context: TaskContext(queueName: action.queueName, key: action.key, collection: action.collection, attempt: 1))
        }
        handler.script("a", .waitForRestart)
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        #expect(await gate.started.values(count: 1) == ["a"])
        try await database.delete(key: "a", collection: "actions")
        gate.release("a")
        gate.release("b")
        #expect(await handler.handled.values(count: 2) == ["a", "b"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func concurrentQueuesAreCappedAndServedInTurn(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = GateHandler()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(maxConcurrentQueues: 2)
        )
        // One save: the broker learns of all three queues at once, in this order.
        try await database.save([
            TestAction(key: "a1", queueName: "h-a"), TestAction(key: "a2", queueName: "h-a"),
            TestAction(key: "b1", queueName: "h-b"), TestAction(key: "b2", queueName: "h-b"),
            TestAction(key: "c1", queueName: "h-c"), TestAction(key: "c2", queueName: "h-c"),
        ])
        #expect(Set(await handler.started.values(count: 2)) == ["a1", "b1"])
        handler.release("a1")
        // The freed slot goes to the queue that has waited longest (c), not back to a.
        #expect(await handler.started.values(count: 3).last == "c1")
        #expect(handler.started.count == 3)
        for key in ["b1", "c1", "a2", "b2", "c2"] {
            handler.release(key)
        }
        #expect(Set(await handler.started.values(count: 6)) == ["a1", "a2", "b1", "b2", "c1", "c2"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func customSortDecidesTheHead(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.save([
            PrioritizedAction(key: "late", queueName: "h-q", priority: 3),
            PrioritizedAction(key: "first", queueName: "h-q", priority: 1),
            PrioritizedAction(key: "tie-1", queueName: "h-q", priority: 2),
            PrioritizedAction(key: "tie-2", queueName: "h-q", priority: 2),
        ])
        let handler = RecordingHandler<PrioritizedAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        #expect(await handler.handled.values(count: 4) == ["first", "tie-1", "tie-2", "late"])
        await broker.shutdown()
    }

    @Test func enqueueingInsideTheCallersTransactionCommitsTogether() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await database.write { tx in
            try tx.db.execute(sql: "CREATE TABLE message (id TEXT PRIMARY KEY, body TEXT)")
        }
        struct Rollback: Error {}
        await #expect(throws: Rollback.self) {
            try await database.write { tx in
                try tx.db.execute(sql: "INSERT INTO message (id, body) VALUES ('m1', 'lost')")
                try tx.save(TestAction(key: "lost", queueName: "h-q"))
                throw Rollback()
            }
        }
        let saved = try await database.write { tx -> Int in
            try tx.db.execute(sql: "INSERT INTO message (id, body) VALUES ('m2', 'hello')")
            try tx.save(TestAction(key: "m2", queueName: "h-q"))
            return try Int.fetchOne(tx.db, sql: "SELECT count(*) FROM message") ?? -1
        }
        #expect(saved == 1)
        #expect(await handler.handled.values(count: 1) == ["m2"])
        await broker.shutdown()
        #expect(handler.handled.values == ["m2"])
    }

    @Test(arguments: Backend.allCases) func snapshotAndEventsDescribeTheQueues(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = GateHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        _ = await handler.started.values(count: 1)
        let snapshot = try await broker.snapshot()
        #expect(snapshot.withoutSavedTimes == [TaskQueueSnapshot(name: "h-q", pending: 2, inFlight: "a", pause: nil, attempts: 0)])
        #expect(snapshot.first?.oldestSavedAt != nil, "a queue with pending actions says since when")
        handler.release("a")
        handler.release("b")
        let events = await recorder.wait { $0.isSuccess("b") }
        #expect(events == [
            .started(queueName: "h-q", key: "a", collection: "actions", attempt: 1),
            .succeeded(queueName: "h-q", key: "a", collection: "actions"),
            .started(queueName: "h-q", key: "b", collection: "actions", attempt: 1),
            .succeeded(queueName: "h-q", key: "b", collection: "actions"),
        ])
        await broker.shutdown()
        #expect(await recorder.events.values(count: 5).last == .stopped)
    }

    @Test(arguments: Backend.allCases) func shutdownWaitsForRunningHandlersAndStoresTheirOutcome(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = GateHandler()
        let clock = ManualClock()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, clock: clock)
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        _ = await handler.started.values(count: 1)
        let shutdown = Task { await broker.shutdown() }
        // The broker is stopping once `shutdown()` sleeps on its time limit: a released "a" stored
        // before then would let "b" start.
        await clock.sleepers(atLeast: 1)
        handler.release("a")
        handler.release("b")
        await shutdown.valueOrCancel
        // a finished and was deleted; b was never taken.
        #expect(handler.started.values == ["a"])
        #expect(try await database.snapshot().withoutSavedTimes == [TaskQueueSnapshot(name: "h-q", pending: 1)])
    }

    @Test(arguments: Backend.allCases) func shutdownGivesUpOnAHandlerAfterTheTimeoutAndKeepsItsAction(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ManualClock()
        let handler = GateHandler()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler,
            configuration: .init(shutdownTimeout: .seconds(10)), clock: clock
        )
        try await database.save(TestAction(key: "stuck", queueName: "h-q"))
        _ = await handler.started.values(count: 1)
        let shutdown = Task { await broker.shutdown() }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(10))
        await shutdown.valueOrCancel
        #expect(try await database.snapshot().withoutSavedTimes == [TaskQueueSnapshot(name: "h-q", pending: 1)])
        handler.release("stuck")
    }

    @Test(arguments: Backend.allCases) func brokerIsAServiceThatStopsOnGracefulShutdown(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let recorder = EventRecorder(broker)
        let group = ServiceGroup(services: [broker], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let running = Task { try await group.run() }
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        _ = await handler.handled.values(count: 1)
        await group.triggerGracefulShutdown()
        try await running.valueOrCancel
        _ = await recorder.wait { $0 == .stopped }
    }

    @Test func aDatabaseWrittenByANewerVersionIsRefused() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        _ = try await TaskDatabase.sqlite(path: path)
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('taskbroker-v99')")
        }
        let error = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskDatabase.sqlite(path: path)
        }
        #expect(error?.code == .incompatibleSchema)
    }

    @Test(arguments: [Double.infinity, .nan, -1, 1e30])
    func anyBusyTimeoutOpensTheDatabaseWithoutCrashing(busyTimeout: Double) async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"), configuration: .init(busyTimeout: busyTimeout))
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        #expect(try await database.snapshot().map(\.pending) == [1])
    }

    @Test func anUnopenableFileGetsAStorageError() async throws {
        let error = await #expect(throws: TaskBrokerError.self) {
            _ = try await TaskDatabase.sqlite(path: "/nonexistent-dir-\(UUID().uuidString)/tasks.sqlite")
        }
        #expect(error?.code == .storageFailed)
    }

    @Test(arguments: Backend.allCases) func purgeEmptiesAQueueAndTheBrokerForgetsIt(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        #expect(try await database.purge(queueName: "h-q") == 2)
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await database.save(TestAction(key: "c", queueName: "h-q"))
        #expect(await handler.handled.values(count: 1) == ["c"])
        await broker.shutdown()
    }
}

@Suite(.timeLimit(.minutes(3)))
struct HandlerBridgingAndReplacementTests {
    @Test func asyncHandlerAnswersTheSeedsCallbackForm() async throws {
        let handler = RecordingHandler<TestAction>()
        handler.script("a", .retry(after: .milliseconds(2_500)), .waitForRestart)
        let answers = EventCollector<String>()
        for answered in 1...3 {
            handler.handleNextItem(TestAction(key: "a", queueName: "q")) { success, retryTimeout in
                answers.record("\(success) \(retryTimeout)")
            }
            // The loop counts, not `answers.count`: the callback may answer before the count is read,
            // and the wait would then be for an answer nobody asked for.
            _ = await answers.values(count: answered)
        }
        #expect(answers.values == ["false 2.5", "false -1.0", "true 0.0"])
    }

    @Test(arguments: Backend.allCases) func resavingARunningActionRunsTheNewVersionNext(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = GateHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let recorder = EventRecorder(broker)
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        #expect(await handler.started.values(count: 1) == ["a"])
        try await database.save(TestAction(key: "a", queueName: "h-q", priority: 1))
        handler.release("a")
        handler.release("b")
        // The run of the old version is discarded; the new one keeps a's place, ahead of b.
        #expect(await handler.started.values(count: 3) == ["a", "a", "b"])
        let events = await recorder.wait { $0.isSuccess("b") }
        #expect(events.contains(.discarded(queueName: "h-q", key: "a", collection: "actions")))
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }
}
