import AsyncPrimitivesTesting
import Foundation
import QueueRetry
import TaskBroker
import Testing

/// A failed read, claim or commit is retried with backoff: the queue keeps its place and its order,
/// the failure is reported, and everything goes on once storage works again, without a restart.
@Suite(.timeLimit(.minutes(3)))
struct StorageFaultTests {
    /// A broker over `storage` that fails, with a manual clock for its retries (1 s, then 2 s).
    private func broker(
        on database: TaskDatabase, handler: some TaskQueueHandler, clock: ManualClock
    ) async throws -> (TaskQueueBroker, EventRecorder) {
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler,
            configuration: .init(startsAutomatically: false, storageRetryBackoff: Backoff(initial: .seconds(1), maximum: .seconds(4))),
            clock: clock
        )
        let recorder = EventRecorder(broker)
        broker.start()
        return (broker, recorder)
    }

    /// A save whose task is cancelled before it runs throws `CancellationError` (not a storage
    /// failure that says nothing was applied) and stores nothing.
    @Test(arguments: Backend.allCases) func aCancelledSaveThrowsCancellation(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let save = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await database.save(TestAction(key: "cancelled", queueName: "h-cancelled"))
        }
        await #expect(throws: CancellationError.self) { try await save.value }
        #expect(try await database.snapshot().isEmpty)
    }

    @Test func aQueueWhoseReadFailsIsReadAgainAndNothingOvertakesItsStoredActions() async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        try await sqlite.save(["a", "b", "c"].map { TestAction(key: $0, queueName: "h-q") })
        let flaky = FlakyStorage(sqlite.storage, failing: [.load: 2])
        let database = TaskDatabase(storage: flaky)
        let clock = ManualClock()
        let handler = RecordingHandler<TestAction>()
        let (broker, recorder) = try await broker(on: database, handler: handler, clock: clock)

        let first = await recorder.wait { $0.isStorageFailure }
        #expect(first.last == .storageFailed(operation: .load, queueNames: ["h-q"], message: "storageFailed: injected load failure", retryIn: .seconds(1)))
        let waiting = try #require(try await broker.snapshot().first { $0.name == "h-q" })
        #expect(waiting.storageFailure?.contains("injected load failure") == true)
        // Saved while the queue cannot be read: it must run after the stored actions.
        try await database.save(TestAction(key: "d", queueName: "h-q"))
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        _ = await recorder.wait(for: { $0.isStorageFailure }, occurrence: 2)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(2))
        #expect(await handler.handled.values(count: 4) == ["a", "b", "c", "d"])
        let events = await recorder.wait { $0.isSuccess("d") }
        #expect(events.contains(.storageRecovered(operation: .load, queueNames: ["h-q"])))
        #expect(try await broker.snapshot().allSatisfy { $0.storageFailure == nil })
        await broker.shutdown()
        #expect(handler.handled.values == ["a", "b", "c", "d"])
        #expect(try await database.snapshot().isEmpty)
    }

    @Test func aFailedClaimIsTriedAgainAndEveryActionRunsOnceInOrder() async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let flaky = FlakyStorage(sqlite.storage, failing: [.claim: 2])
        let database = TaskDatabase(storage: flaky)
        let clock = ManualClock()
        let handler = RecordingHandler<TestAction>()
        let (broker, recorder) = try await broker(on: database, handler: handler, clock: clock)
        try await database.save(["a", "b"].map { TestAction(key: $0, queueName: "h-q") })

        _ = await recorder.wait { $0.isStorageFailure(.claim) }
        #expect(handler.handled.count == 0, "nothing runs without its claim")
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        _ = await recorder.wait(for: { $0.isStorageFailure(.claim) }, occurrence: 2)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(2))
        #expect(await handler.handled.values(count: 2) == ["a", "b"])
        let events = await recorder.wait { $0.isSuccess("b") }
        #expect(events.contains(.storageRecovered(operation: .claim, queueNames: ["h-q"])))
        await broker.shutdown()
        #expect(handler.handled.values == ["a", "b"])
        #expect(flaky.calls(.claim) == 4)
    }

    @Test func aFailedCommitIsStoredAgainAndTheHandlerDoesNotRunTwice() async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let flaky = FlakyStorage(sqlite.storage, failing: [.store: 2])
        let database = TaskDatabase(storage: flaky)
        let clock = ManualClock()
        let handler = RecordingHandler<TestAction>()
        handler.script("b", .retry(after: .zero))
        let (broker, recorder) = try await broker(on: database, handler: handler, clock: clock)
        try await database.save(["a", "b", "c"].map { TestAction(key: $0, queueName: "h-q") })

        _ = await recorder.wait { $0.isStorageFailure(.store) }
        let waiting = try #require(try await broker.snapshot().first { $0.name == "h-q" })
        #expect(waiting.inFlight == "a")
        #expect(waiting.storageFailure?.contains("injected store failure") == true)
        #expect(handler.handled.values == ["a"], "b waits for a's outcome")
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        _ = await recorder.wait(for: { $0.isStorageFailure(.store) }, occurrence: 2)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(2))
        _ = await recorder.wait { $0.isSuccess("c") }
        await broker.shutdown()
        #expect(handler.handled.values == ["a", "b", "b", "c"], "each run's outcome was stored once: a ran once")
        #expect(try await database.snapshot().isEmpty)
    }
}
