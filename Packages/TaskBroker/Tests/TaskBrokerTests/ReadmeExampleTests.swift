import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

// The README's example, kept compiling and true (its types are in Support/ReadmeExample.swift).

@Suite(.timeLimit(.minutes(1)))
struct ReadmeExampleTests {
    @Test func readmeExampleSendsTheMessage() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let handler = MessageHandler()

        let database = try await TaskDatabase.sqlite(path: path)
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        try await database.save(MessageSendAction(
            key: "m1", collection: "messages", messageToSendKey: "message-42",
            queueName: broker.queueName(withSuffix: "queue2"), date: Date()
        ))

        #expect(await handler.sent.values(count: 1) == ["message-42"])
        await broker.shutdown()
    }
}
