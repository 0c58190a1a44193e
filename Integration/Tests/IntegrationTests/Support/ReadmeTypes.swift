import Foundation
import QueueCore
import TaskBroker

// The types the top-level README's examples declare, verbatim.

struct Upload: QueueJob {
    let id: String
    var createdDate = Date()
    var data: Data? = nil
    var action = "upload"
}

struct SendMessage: TaskQueueAction {
    var key: String
    var collection = "messages"
    var queueName: String
}

final class Sender: AsyncTaskQueueHandler {
    func handle(_ action: SendMessage, context _: TaskContext) async -> TaskResult {
        .success // or .retry(after: .seconds(5)), or .waitForRestart
    }
}
