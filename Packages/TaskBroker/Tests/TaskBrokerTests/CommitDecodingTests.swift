import Foundation
import TaskBroker
import Testing

/// A broker hears of a save from the save's commit: on SQLite, inside GRDB's commit hook, on the
/// writer queue that every other write of the file waits for. It decodes the saved action (the
/// user's `init(from:)`) later, on its own task.
@Suite(.timeLimit(.minutes(3)))
struct CommitDecodingTests {
    @Test func aSlowDecoderDoesNotHoldUpTheSaveThatEnqueuesItsAction() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        let collection = "c-\(UUID().uuidString)"
        let gate = DecodingGate.of(collection)
        let handler = RecordingHandler<SlowDecodingAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)

        try await database.save(SlowDecodingAction(key: "a", collection: collection, queueName: "h-q"))
        // The save returned. Decoding it in the commit, the broker would have held the save until
        // the gate gave up (10 s later), and `timedOut` would say so.
        #expect(await gate.entered.values(count: 1) == ["a"], "the broker decodes the saved action")
        gate.open()
        #expect(await handler.handled.values(count: 1) == ["a"])
        #expect(!gate.timedOut, "no decoding waited for the gate to give up: the save did not wait for it")
        await broker.shutdown()
        #expect(try await database.snapshot().isEmpty)
    }
}
