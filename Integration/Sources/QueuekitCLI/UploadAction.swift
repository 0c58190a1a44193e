import Foundation
import TaskBroker

/// One simulated photo upload: what the demo and `queuekit enqueue` store, and what the
/// upload handler runs.
///
/// The action carries its own simulated fate (`transientFailures`, `failsPermanently`) so that
/// a run is reproducible from its seed and survives a restart unchanged.
struct UploadAction: TaskQueueAction, Hashable {
    /// The collection of uploads.
    static let collection = "uploads"

    var key: String
    var collection: String
    var queueName: String
    /// The user the upload belongs to, e.g. `user-07`; each user has one serial queue.
    var user: String
    var file: String
    var bytes: Int
    /// How many times the upload fails before it succeeds.
    var transientFailures: Int
    /// The upload never succeeds: it ends as a dead letter.
    var failsPermanently: Bool

    init(key: String, user: String, file: String, bytes: Int, transientFailures: Int = 0, failsPermanently: Bool = false) {
        self.key = key
        self.collection = Self.collection
        self.queueName = QueueNames.live(user)
        self.user = user
        self.file = file
        self.bytes = bytes
        self.transientFailures = transientFailures
        self.failsPermanently = failsPermanently
    }

    /// The same upload with its cause of failure fixed, as `queuekit retry --simulate-fix` stores it.
    func fixed() -> UploadAction {
        var copy = self
        copy.failsPermanently = false
        copy.transientFailures = 0
        return copy
    }
}

/// How queue names are made: the broker `uploads` claims every `uploads-<user>` queue. An
/// upload that fails for good stays in its queue as a dead letter (TaskBroker's own), which no
/// broker runs until `queuekit retry` replays it.
enum QueueNames {
    static let broker = "uploads"

    static func live(_ user: String) -> String { "\(broker)-\(user)" }

    static func isLive(_ queue: String) -> Bool { queue.hasPrefix("\(broker)-") }

    /// The user of a queue name, accepting `user-07` and `uploads-user-07`.
    static func user(of name: String) -> String {
        isLive(name) ? String(name.dropFirst(broker.count + 1)) : name
    }
}
