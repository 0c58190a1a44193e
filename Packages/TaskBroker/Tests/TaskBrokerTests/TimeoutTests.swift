import AsyncPrimitivesTesting
import Foundation
import QueueRetry
import TaskBroker
import Testing

/// `actionTimeout`: a run past its time limit is cancelled and counts as a failed attempt, retried
/// after `retryBackoff`, up to `maxAttempts`; a callback handler that never completes is left
/// behind, and its late completion changes nothing.
@Suite(.timeLimit(.minutes(3)))
struct TimeoutTests {
    @Test(arguments: Backend.allCases) func aRunPastItsTimeLimitIsCancelledRetriedAndThenADeadLetter(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ObservedClock()
        let handler = HangingHandler()
        var configuration = TaskQueueBroker.Configuration(startsAutomatically: false)
        configuration.actionTimeout = .seconds(5)
        configuration.retryBackoff = Backoff(initial: .seconds(2), maximum: .seconds(2))
        configuration.maxAttempts = 2
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration, clock: clock)
        let events = EventRecorder(broker)
        broker.start()
        try await database.save([TestAction(key: "hang-1", queueName: "h-q"), TestAction(key: "ok", queueName: "h-q")])
        #expect(await handler.runs.values(count: 1) == ["hang-1#1"])

        try await Self.advance(clock, by: .seconds(5))
        #expect(await handler.cancelled.values(count: 1) == ["hang-1"], "the handler's task is cancelled")
        let failed = await events.wait { if case .failed = $0 { true } else { false } }
        #expect(failed.last == .failed(queueName: "h-q", key: "hang-1", collection: "actions", result: .retry(after: .seconds(2))))
        let snapshot = try #require(try await database.snapshot().first)
        #expect(snapshot.attempts == 1 && snapshot.lastFailure?.reason == "timed out after 5.0 seconds", "\(snapshot)")

        try await Self.advance(clock, by: .seconds(2))
        #expect(await handler.runs.values(count: 2) == ["hang-1#1", "hang-1#2"])
        try await Self.advance(clock, by: .seconds(5))
        #expect(await handler.runs.values(count: 3) == ["hang-1#1", "hang-1#2", "ok#1"], "a dead letter, and the queue goes on")
        let letters = try await database.deadLetters()
        #expect(letters.map(\.key) == ["hang-1"] && letters.first?.attempts == 2)
        #expect(letters.first?.reason.contains("timed out after 5.0 seconds") == true, "\(letters)")
        await broker.shutdown()
    }

    @Test(arguments: Backend.allCases) func aCallbackThatNeverCompletesIsLeftBehindAndItsLateCompletionChangesNothing(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ObservedClock()
        let handler = SilentFirstRunHandler()
        var configuration = TaskQueueBroker.Configuration(startsAutomatically: false)
        configuration.actionTimeout = .seconds(5)
        configuration.retryBackoff = Backoff(initial: .seconds(1), maximum: .seconds(1))
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration, clock: clock)
        let events = EventRecorder(broker)
        broker.start()
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        #expect(await handler.runs.values(count: 1) == ["a"])
        try await Self.advance(clock, by: .seconds(5))
        _ = await events.wait { if case .failed = $0 { true } else { false } }

        // The first run's success, long after its time: not stored, and the action runs again.
        handler.completeFirstRun(success: true)
        #expect(try await database.snapshot().first?.attempts == 1)
        try await Self.advance(clock, by: .seconds(1))
        _ = await events.wait { $0.isSuccess("a") }
        #expect(handler.runs.values == ["a", "a"])
        #expect(try await database.snapshot().isEmpty)
        await broker.shutdown()
    }

    /// Waits for a timer due `duration` from now (the broker's other timers may sleep too), then
    /// moves the clock by it.
    private static func advance(_ clock: ObservedClock, by duration: Duration) async throws {
        let due = clock.now.advanced(by: duration)
        try #require(await clock.sleepers { $0[due] != nil }, "a timer sleeps until \(due): \(clock.sleepers)")
        clock.advance(by: duration)
    }
}
