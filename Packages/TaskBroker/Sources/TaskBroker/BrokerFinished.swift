import Foundation

/// A handler's outcome on its way to the database.
struct BrokerFinished: Sendable {
    let task: StoredTask
    let result: TaskResult
    let pause: TaskPause?

    var outcome: TaskOutcome {
        result == .success ? .completed(task) : .failed(task, pause: pause)
    }
}

struct BrokerActionID: Hashable {
    let collection: String
    let key: String

    init(_ task: StoredTask) {
        collection = task.collection
        key = task.key
    }
}

