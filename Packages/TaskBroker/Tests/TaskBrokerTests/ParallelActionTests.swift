import AsyncPrimitivesTesting
import Foundation
import QueueRetry
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker
import Testing

/// Plain parallel actions (`saveParallel`): no order among them, side by side up to the broker's
/// `maxConcurrentParallelActions`, each run at least once under a claim of its own, with retries,
/// dead letters, time limits, pauses and restarts as a queue's actions have them.
@Suite(.timeLimit(.minutes(3)))
struct ParallelActionTests {
    @Test(arguments: Backend.allCases) func theyRunSideBySideUpToTheBrokersLimitEachOnce(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = GatedParallelHandler()
        var configuration = TaskQueueBroker.Configuration()
        configuration.maxConcurrentParallelActions = 3
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration)
        let events = EventRecorder(broker)
        try await database.saveParallel((0..<10).map { TestAction(key: "mail-\($0)", queueName: "h-mail") })
        #expect(await handler.runs.values(count: 3).count == 3, "three start at once, none waiting for another")
        #expect(try await database.snapshot().first?.parallelPending == 10, "all ten are stored until done")
        handler.open()
        _ = await events.wait(for: { if case .succeeded = $0 { true } else { false } }, occurrence: 10)
        let all = handler.runs.values
        #expect(Set(all) == Set((0..<10).map { "mail-\($0)" }) && all.count == 10, "each ran once: \(all)")
        #expect(handler.mostAtOnce == 3, "at most the limit ran at once, and the limit was used: \(handler.mostAtOnce)")
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty, "every one is done and deleted")
    }

    @Test(arguments: Backend.allCases) func failuresRetryAndTheLastIsADeadLetterThatAReplayRunsAgain(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = AttemptRecorder()
        handler.failing = ["bad"]
        handler.refusing = ["refused"]
        var configuration = TaskQueueBroker.Configuration()
        configuration.maxAttempts = 3
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration)
        let events = EventRecorder(broker)
        try await database.saveParallel([
            TestAction(key: "bad", queueName: "h-p"), TestAction(key: "good", queueName: "h-p"), TestAction(key: "refused", queueName: "h-p"),
        ])
        _ = await events.wait { if case .deadLettered(_, "refused", _, "no such address") = $0 { true } else { false } }
        #expect(handler.runs.values.filter { $0.hasPrefix("refused") } == ["refused#1"], "a dead-letter result is final at once")
        #expect(try await database.discardDeadLetter(key: "refused", collection: "actions"))
        _ = await events.wait { if case .deadLettered(_, "bad", _, _) = $0 { true } else { false } }
        #expect(handler.runs.values.filter { $0.hasPrefix("bad") } == ["bad#1", "bad#2", "bad#3"], "\(handler.runs.values)")
        let letters = try await database.deadLetters()
        #expect(letters.map(\.key) == ["bad"] && letters.first?.attempts == 3, "the discarded one is gone: \(letters)")
        #expect(letters.first?.reason.contains("maxAttempts") == true, "\(letters)")
        #expect(try await database.lookup(key: "bad", collection: "actions").map { if case .deadLetter = $0 { true } else { false } } == true)
        #expect(try await database.snapshot().first?.deadLetters == 1)

        handler.failing = []
        #expect(try await database.replayDeadLetter(key: "bad", collection: "actions"))
        _ = await events.wait { $0.isSuccess("bad") }
        #expect(handler.runs.values.last == "bad#1", "replayed, it starts from its first attempt: \(handler.runs.values)")
        #expect(try await database.deadLetters().isEmpty)
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func aTimedRetryWaitsForItsTimeOnTheBrokersClock(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ObservedClock()
        let handler = RetryOnceHandler(after: .seconds(5))
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "h", handler: handler, configuration: .init(startsAutomatically: false), clock: clock
        )
        let events = EventRecorder(broker)
        broker.start()
        try await database.saveParallel(TestAction(key: "a", queueName: "h-p"))
        _ = await events.wait { if case .failed(_, "a", _, _) = $0 { true } else { false } }
        #expect(handler.runs.values == ["a#1"])
        // The lane's one timer, for the retry's time (the queue engine sleeps on nothing).
        let due = clock.now.advanced(by: .seconds(5))
        try #require(await clock.sleepers { $0[due] != nil }, "a timer sleeps until the retry: \(clock.sleepers)")
        #expect(handler.runs.values == ["a#1"], "not before its time")
        // One at the start, one or two for a, one after its failure (and one for a save heard late).
        #expect(broker.engineView().parallelClaims <= 6, "a lane with nothing ready claims no more: \(broker.engineView().parallelClaims)")
        clock.advance(by: .seconds(5))
        _ = await events.wait { $0.isSuccess("a") }
        #expect(handler.runs.values == ["a#1", "a#2"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func aTimeLimitAndADeadLetterResultApplyToThem(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ObservedClock()
        let handler = HangingHandler()
        var configuration = TaskQueueBroker.Configuration(startsAutomatically: false)
        configuration.actionTimeout = .seconds(5)
        configuration.maxAttempts = 1
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration, clock: clock)
        let events = EventRecorder(broker)
        broker.start()
        try await database.saveParallel(TestAction(key: "hang", queueName: "h-p"))
        #expect(await handler.runs.values(count: 1) == ["hang#1"])
        let due = clock.now.advanced(by: .seconds(5))
        try #require(await clock.sleepers { $0[due] != nil })
        clock.advance(by: .seconds(5))
        #expect(await handler.cancelled.values(count: 1) == ["hang"], "the handler's task is cancelled")
        _ = await events.wait { if case .deadLettered(_, "hang", _, _) = $0 { true } else { false } }
        let letters = try await database.deadLetters()
        #expect(letters.first?.reason.contains("timed out after 5.0 seconds") == true, "\(letters)")
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func anOperatorsPauseHoldsThemAndAResumeRunsThem(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.pauseQueues(["h-paused"])
        let handler = AttemptRecorder()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let events = EventRecorder(broker)
        try await database.saveParallel([TestAction(key: "held", queueName: "h-paused")])
        try await database.saveParallel([TestAction(key: "free", queueName: "h-other")])
        _ = await events.wait { $0.isSuccess("free") }
        #expect(handler.runs.values == ["free#1"], "the paused queue's action waits")
        #expect(try await database.snapshot().first { $0.name == "h-paused" }?.parallelPending == 1)
        try await database.resumeQueues(["h-paused"])
        _ = await events.wait { $0.isSuccess("held") }
        #expect(handler.runs.values == ["free#1", "held#1"])
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func aBrokerStoppedMidwayLeavesTheRestAndTheNextRunsThem(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let first = GatedParallelHandler()
        var configuration = TaskQueueBroker.Configuration()
        configuration.maxConcurrentParallelActions = 2
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: first, configuration: configuration)
        try await database.saveParallel((0..<6).map { TestAction(key: "k\($0)", queueName: "h-p") })
        let started = await first.runs.values(count: 2)
        #expect(started.count == 2)
        async let stopped: Void = broker.shutdown()
        first.open()
        await stopped
        #expect(first.runs.values.count == 2, "a stopping broker starts nothing more: \(first.runs.values)")
        #expect(try await database.snapshot().first?.parallelPending == 4, "the two that ran are done, four are left")

        let again = try await store.open()
        let second = AttemptRecorder()
        let next = try await TaskQueueBroker.setup(database: again, name: "h", handler: second)
        let events = EventRecorder(next)
        _ = await events.wait(for: { if case .succeeded = $0 { true } else { false } }, occurrence: 4)
        #expect(Set(second.runs.values) == Set(Set((0..<6).map { "k\($0)" }).subtracting(started).map { "\($0)#1" }), "\(second.runs.values)")
        await next.shutdown()
        #expect(try await again.snapshot().isEmpty)
    }

    @Test(arguments: Backend.allCases) func aBrokerWithAFilterTakesThoseOfTheQueuesItAccepts(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = AttemptRecorder()
        let broker = try await TaskQueueBroker.setup(database: database, name: "filtered", handler: handler) { $0.hasSuffix("-mine") }
        let events = EventRecorder(broker)
        try await database.saveParallel([TestAction(key: "other", queueName: "a-theirs"), TestAction(key: "mine", queueName: "a-mine")])
        _ = await events.wait { $0.isSuccess("mine") }
        await broker.shutdown()
        #expect(handler.runs.values == ["mine#1"])
        #expect(try await database.snapshot().map(\.name) == ["a-theirs"])
    }

    @Test func aBackendWithoutThemRefusesTheSaveWithATypedError() async throws {
        let store = try TestStore(.sqlite)
        // A backend of someone else's that stores no plain parallel actions.
        let database = TaskDatabase(storage: GatedStorage(try await store.open().storage, holdingReadsOf: []))
        let error = await #expect(throws: TaskBrokerError.self) {
            try await database.saveParallel(TestAction(key: "a", queueName: "q"))
        }
        #expect(error?.code == .unsupported)
    }

    /// A failed look for the next time is tried again after the backoff: an action saved to run
    /// later still starts at its time, with nothing else to wake the broker.
    @Test func aFailedLookForTheNextTimeIsTriedAgainAfterTheBackoff() async throws {
        let store = try TestStore(.sqlite)
        let flaky = FlakyStorage(try await store.open().storage, failing: [:])
        let database = TaskDatabase(storage: flaky)
        let clock = ObservedClock()
        let start = Date(timeIntervalSince1970: 2_000_000_000)
        try await database.saveParallel(TestAction(key: "later", queueName: "h-p"), notBefore: start.addingTimeInterval(10))
        flaky.parallelFailuresLeft.withLock { $0["nextTime"] = 1 }
        let handler = AttemptRecorder()
        var configuration = TaskQueueBroker.Configuration(wallClock: { start }, startsAutomatically: false)
        configuration.storageRetryBackoff = Backoff(initial: .seconds(1), maximum: .seconds(1))
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration, clock: clock)
        let events = EventRecorder(broker)
        broker.start()
        _ = await events.wait { $0.isStorageFailure(.claim) }
        // The backoff's timer, then the action's own.
        try #require(await clock.sleepers { $0[clock.now.advanced(by: .seconds(1))] != nil }, "\(clock.sleepers)")
        clock.advance(by: .seconds(1))
        let due = clock.now.advanced(by: .seconds(9))
        try #require(await clock.sleepers { $0[due] != nil }, "a timer for the action's time: \(clock.sleepers)")
        #expect(handler.runs.values.isEmpty)
        clock.advance(by: .seconds(9))
        _ = await events.wait { $0.isSuccess("later") }
        #expect(handler.runs.values == ["later#1"])
        await broker.shutdown()
    }

    /// An action held for a restart is released by the next broker's start, also when the first
    /// try fails: it is tried again after the backoff.
    @Test func heldActionsAreReleasedAtTheNextStartEvenIfTheFirstTryFails() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        let first = RestartOnceHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: first)
        let events = EventRecorder(broker)
        try await database.saveParallel(TestAction(key: "held", queueName: "h-p"))
        _ = await events.wait { if case .failed(_, "held", _, .waitForRestart) = $0 { true } else { false } }
        await broker.shutdown()

        let flaky = FlakyStorage(try await store.open().storage, failing: [:])
        flaky.parallelFailuresLeft.withLock { $0["releaseHeld"] = 1 }
        let clock = ObservedClock()
        var configuration = TaskQueueBroker.Configuration(startsAutomatically: false)
        configuration.storageRetryBackoff = Backoff(initial: .seconds(1), maximum: .seconds(1))
        let second = AttemptRecorder()
        let next = try await TaskQueueBroker.setup(
            database: TaskDatabase(storage: flaky), name: "h", handler: second, configuration: configuration, clock: clock
        )
        let nextEvents = EventRecorder(next)
        next.start()
        try #require(await clock.sleepers { $0[clock.now.advanced(by: .seconds(1))] != nil }, "the retry's backoff: \(clock.sleepers)")
        #expect(second.runs.values.isEmpty, "still held")
        clock.advance(by: .seconds(1))
        _ = await nextEvents.wait { $0.isSuccess("held") }
        #expect(second.runs.values == ["held#2"])
        await next.shutdown()
    }
}
