import ArgumentParser
import Foundation
import TaskBroker

/// A queue as the commands show it.
struct QueueInfo: Sendable {
    var name: String
    /// Live uploads (dead letters not counted).
    var pending: Int
    var attempts: Int
    var pause: TaskPause?
    var deadLetters: Int
    var pausedByOperator: Bool
}

/// The tool's view of a TaskBroker database.
struct Store: Sendable {
    let location: DatabaseLocation
    let database: TaskDatabase
    /// What the tool writes in its own SQL, in the backend's dialect.
    let backend: any StoreBackend

    /// The database for messages: the SQLite path, or the PostgreSQL URL without its password.
    var name: String { location.description }

    /// One line for an error of the broker, with the cause's first line.
    static func describe(_ error: TaskBrokerError) -> String {
        var text = error.message
        if let underlying = error.underlying {
            let cause = String(describing: underlying).split(separator: "\n").first.map(String.init) ?? ""
            // A cause that only repeats the message (QueuePersistence's own error) adds nothing;
            // nor does postgres-nio's, whose description is one generic sentence (the broker's
            // message already names what the server said).
            if !cause.isEmpty, !cause.contains(text), !cause.hasPrefix("PSQLError") { text += " (\(cause))" }
        }
        return text
    }

    /// Runs a storage call, turning the broker's and the backend's errors into one-line tool
    /// errors.
    func run<T: Sendable>(_ what: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as TaskBrokerError {
            throw QueuekitError("could not \(what) in \(name): \(Store.describe(error))")
        } catch let error as StoreBackendError {
            throw QueuekitError("could not \(what) in \(name): \(error.message)")
        }
    }

    /// Every stored queue, sorted by name.
    func queues() async throws -> [QueueInfo] {
        try await run("read the queues") {
            try await database.snapshot().map {
                QueueInfo(
                    name: $0.name, pending: $0.pending, attempts: $0.attempts, pause: $0.pause,
                    deadLetters: $0.deadLetters, pausedByOperator: $0.pausedByOperator
                )
            }
        }
    }

    /// The stored actions of a queue, in order.
    func tasks(in queue: String) async throws -> [StoredTask] {
        try await run("read queue \(queue)") { try await database.storage.tasks(inQueue: queue) }
    }

    /// The queues named as an operator typed them: a name stored in the database as it is, any
    /// other as the demo's user (`alice` for `uploads-alice`).
    func queueNames(for typed: [String]) async throws -> [String] {
        let stored = Set(try await queues().map(\.name))
        return typed.map { stored.contains($0) ? $0 : QueueNames.live(QueueNames.user(of: $0)) }
    }

    /// The dead letters of a queue, or of every queue.
    func deadLetters(in queue: String? = nil) async throws -> [TaskDeadLetter] {
        try await run("read the dead letters") { try await database.deadLetters(queueName: queue) }
    }

    /// The keys of every stored dead letter.
    func deadLetterKeys() async throws -> Set<String> {
        Set(try await deadLetters().map(\.key))
    }

    /// Decodes a stored upload.
    static func upload(from payload: Data) -> UploadAction? {
        try? JSONDecoder().decode(UploadAction.self, from: payload)
    }

    /// A user's queue, named as the user typed it (`alice` or `uploads-alice`); fails with a
    /// one-line error when it has nothing stored and is not paused.
    func resolve(queue name: String) async throws -> (user: String, info: QueueInfo) {
        let user = QueueNames.user(of: name)
        guard let info = try await queues().first(where: { $0.name == QueueNames.live(user) }) else {
            throw QueuekitError(
                "no queue named '\(DatabaseLocation.redacted(name))' in \(self.name); `queuekit stats` lists the queues."
            )
        }
        return (user, info)
    }
}
