import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

/// Dead letters as a user meets them: `maxAttempts` and `.deadLetter(reason:)` move an action out
/// of its queue (which goes on), it survives restarts without running, and it runs again only when
/// replayed.
@Suite(.timeLimit(.minutes(3)))
struct DeadLetterTests {
    @Test(arguments: Backend.allCases) func anActionThatFailsMaxAttemptsTimesIsADeadLetterAndItsQueueGoesOn(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = AttemptRecorder()
        handler.failing = ["a"]
        var configuration = TaskQueueBroker.Configuration(startsAutomatically: false)
        configuration.maxAttempts = 3
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration)
        let events = EventRecorder(broker)
        broker.start()
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        #expect(await handler.runs.values(count: 4) == ["a#1", "a#2", "a#3", "b#1"], "three attempts, then the queue goes on")
        let seen = await events.wait { if case .deadLettered = $0 { true } else { false } }
        guard case .deadLettered(let queueName, let key, _, let reason)? = seen.last else {
            Issue.record("no dead-letter event: \(seen)")
            return
        }
        #expect(queueName == "h-q" && key == "a")
        #expect(reason.contains("3 time(s)") && reason.contains("retry at once"), "\(reason)")
        let letters = try await database.deadLetters()
        #expect(letters.map(\.key) == ["a"] && letters.first?.attempts == 3 && letters.first?.reason == reason)
        #expect(try await database.deadLetters(queueName: "other").isEmpty)
        _ = await events.wait { $0.isSuccess("b") }
        #expect(try await database.snapshot().map(\.deadLetters) == [1])
        await broker.shutdown()

        // A restarted broker does not run it; a replay does, from its first attempt.
        let again = AttemptRecorder()
        let broker2 = try await TaskQueueBroker.setup(database: try await store.open(), name: "h", handler: again, configuration: configuration)
        broker2.start()
        try await database.save(TestAction(key: "c", queueName: "h-q"))
        #expect(await again.runs.values(count: 1) == ["c#1"])
        #expect(try await database.replayDeadLetter(key: "a", collection: "actions"))
        #expect(await again.runs.values(count: 2) == ["c#1", "a#1"])
        #expect(try await database.deadLetters().isEmpty)
        #expect(try await database.replayDeadLetter(key: "a", collection: "actions") == false, "nothing is left to replay")
        await broker2.shutdown()
    }

    @Test(arguments: Backend.allCases) func aHandlerSendsAnActionToTheDeadLettersAtOnce(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        handler.script("a", .deadLetter(reason: "no such address"))
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await database.save([TestAction(key: "a", queueName: "h-q"), TestAction(key: "b", queueName: "h-q")])
        #expect(await handler.handled.values(count: 2) == ["a", "b"])
        await broker.shutdown()
        let letters = try await database.deadLetters(queueName: "h-q")
        #expect(letters.map(\.key) == ["a"] && letters.first?.attempts == 1 && letters.first?.reason == "no such address")
        #expect(try await database.discardDeadLetter(key: "b", collection: "actions") == false, "b is no dead letter")
        #expect(try await database.discardDeadLetter(key: "a", collection: "actions"))
        #expect(try await database.deadLetters().isEmpty)
        #expect(try await database.snapshot().isEmpty)
    }

    /// Without `maxAttempts` (the seed's behaviour) an action is retried as its handler says, for ever.
    @Test func withoutMaxAttemptsAFailingActionIsRetriedAsTheHandlerSays() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        let handler = AttemptRecorder()
        handler.failing = ["a"]
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        try await database.save(TestAction(key: "a", queueName: "h-q"))
        #expect(await handler.runs.values(count: 20).last == "a#20")
        await broker.shutdown()
        #expect(try await database.deadLetters().isEmpty)
    }
}
