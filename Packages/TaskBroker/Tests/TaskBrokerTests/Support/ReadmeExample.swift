import AsyncPrimitivesTesting
import Foundation
import TaskBroker

// The types of the README's example.

struct MessageSendAction: TaskQueueAction {
    let key: String
    let collection: String
    let messageToSendKey: String
    let queueName: String
    let date: Date

    func sort(_ other: MessageSendAction) -> ComparisonResult { date.compare(other.date) }
}

final class MessageHandler: TaskQueueHandler {
    let sent = EventCollector<String>()

    func handleNextItem(_ action: MessageSendAction, completion: @escaping @Sendable (Bool, TimeInterval) -> Void) {
        sent.record(action.messageToSendKey)  // 1. load the message, 2. send it, 3. report:
        completion(true, -1)                  // (false, 5): retry in 5 s; (false, -1): wait for restartQueues
    }
}

// The types of the README's job-system example.

struct MailAction: TaskQueueAction {
    var key: String
    var collection = "mail"
    var queueName: String
    var address: String
}

final class MailHandler: AsyncTaskQueueHandler {
    let sent = EventCollector<String>()

    func handle(_ action: MailAction, context: TaskContext) async -> TaskResult {
        guard action.address.contains("@") else { return .deadLetter(reason: "no such address: \(action.address)") }
        sent.record(action.key)
        return .success
    }
}
