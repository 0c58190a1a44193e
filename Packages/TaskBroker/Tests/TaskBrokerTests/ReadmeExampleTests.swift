import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

// The README's example, kept compiling and true.

private struct MessageSendAction: TaskQueueAction {
    let key: String
    let collection: String
    let messageToSendKey: String
    let queueName: String
    let date: Date

    func sort(_ other: MessageSendAction) -> ComparisonResult { date.compare(other.date) }
}

private final class MessageHandler: TaskQueueHandler {
    let sent = EventCollector<String>()

    func handleNextItem(_ action: MessageSendAction, completion: @escaping @Sendable (Bool, TimeInterval) -> Void) {
        sent.record(action.messageToSendKey)  // 1. load the message, 2. send it, 3. report:
        completion(true, -1)                  // (false, 5): retry in 5 s; (false, -1): wait for restartQueues
    }
}

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
