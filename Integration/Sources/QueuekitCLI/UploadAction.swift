import Foundation
import TaskBroker

/// One simulated photo upload: what the demo and `queuekit enqueue` store, and what the
/// upload handler runs.
///
/// The action carries its own simulated fate (`transientFailures`, `failsPermanently`) so that
/// a run is reproducible from its seed and survives a restart unchanged.
struct UploadAction: TaskQueueAction, Hashable {
    /// The collection of live uploads.
    static let collection = "uploads"
    /// The collection of dead-lettered uploads.
    static let deadLetterCollection = "uploads-deadletter"

    var key: String
    var collection: String
    var queueName: String
    /// The user the upload belongs to, e.g. `user-07`; each user has one serial queue.
    var user: String
    var file: String
    var bytes: Int
    /// How many times the upload fails before it succeeds.
    var transientFailures: Int
    /// The upload never succeeds: it ends in the dead-letter queue.
    var failsPermanently: Bool
    /// On a dead-lettered copy: how many attempts were made and the last error.
    var attempts: Int?
    var lastError: String?

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

    /// The copy stored in the user's dead-letter queue after the last attempt failed.
    func deadLettered(attempts: Int, error: String) -> UploadAction {
        var copy = self
        copy.collection = Self.deadLetterCollection
        copy.queueName = QueueNames.deadLetter(user)
        copy.attempts = attempts
        copy.lastError = error
        return copy
    }

    /// The live action again, as `queuekit retry` puts it back.
    func revived(fixed: Bool) -> UploadAction {
        var copy = self
        copy.collection = Self.collection
        copy.queueName = QueueNames.live(user)
        copy.attempts = nil
        copy.lastError = nil
        if fixed {
            copy.failsPermanently = false
            copy.transientFailures = 0
        }
        return copy
    }
}

/// How queue names are made: the broker `uploads` claims every `uploads-<user>` queue;
/// dead letters wait in `deadletter-<user>`, which no broker claims.
enum QueueNames {
    static let broker = "uploads"
    static let deadLetterPrefix = "deadletter-"

    static func live(_ user: String) -> String { "\(broker)-\(user)" }
    static func deadLetter(_ user: String) -> String { "\(deadLetterPrefix)\(user)" }

    static func isLive(_ queue: String) -> Bool { queue.hasPrefix("\(broker)-") }
    static func isDeadLetter(_ queue: String) -> Bool { queue.hasPrefix(deadLetterPrefix) }

    /// The user of a queue name, accepting `user-07`, `uploads-user-07` and `deadletter-user-07`.
    static func user(of name: String) -> String {
        if isLive(name) { return String(name.dropFirst(broker.count + 1)) }
        if isDeadLetter(name) { return String(name.dropFirst(deadLetterPrefix.count)) }
        return name
    }
}
