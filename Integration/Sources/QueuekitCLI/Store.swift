import ArgumentParser
import Foundation
import GRDB
import TaskBroker

/// The `--database sqlite:PATH` option every command takes.
struct DatabaseOptions: ParsableArguments {
    static let defaultLocation = "sqlite:./queuekit-demo.sqlite"

    @Option(
        name: .long,
        help: ArgumentHelp("Where the queues live: sqlite:PATH.", valueName: "sqlite:PATH")
    )
    var database: String = DatabaseOptions.defaultLocation

    /// The file path inside `--database`.
    func path() throws -> String {
        guard database.hasPrefix("sqlite:") else {
            throw QueuekitError(
                "--database expects sqlite:PATH (got '\(database)'); queuekit runs on an embedded SQLite file.",
                exitCode: 64
            )
        }
        let path = String(database.dropFirst("sqlite:".count))
        guard !path.isEmpty else {
            throw QueuekitError("--database sqlite: needs a file path, e.g. sqlite:./queuekit-demo.sqlite", exitCode: 64)
        }
        return path
    }

    /// Opens the database; with `create: false` a missing file is an error instead of a new file.
    func open(create: Bool) async throws -> Store {
        let path = try path()
        do {
            // Every commit survives a crash of the process; a power loss may cost the last few
            // (the demo's choice; the library's default is FULL).
            let database = try await TaskDatabase.sqlite(
                path: path, configuration: .init(synchronous: .normal, createsMissingFile: create)
            )
            return Store(path: path, database: database)
        } catch let error as TaskBrokerError where error.code == .databaseNotFound {
            throw QueuekitError(
                "no database at \(path); run `queuekit demo` or `queuekit enqueue` first, or pass --database sqlite:PATH."
            )
        } catch let error as TaskBrokerError where error.code == .corruptDatabase {
            let cause = (error.underlying as? DatabaseError).flatMap(\.message) ?? error.message
            throw QueuekitError("\(path) is not a QueueKit database or is corrupt (\(cause)); move it aside or pass another --database.")
        } catch let error as TaskBrokerError {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                throw QueuekitError("\(path) is a directory, not a database file; pass --database sqlite:FILE.")
            }
            throw QueuekitError("cannot open \(path): \(Store.describe(error))")
        }
    }
}

/// A queue as the commands show it.
struct QueueInfo: Sendable {
    var name: String
    var pending: Int
    var attempts: Int
    var pause: TaskPause?
    var isDeadLetter: Bool { QueueNames.isDeadLetter(name) }
}

/// The tool's view of a TaskBroker SQLite file.
struct Store: Sendable {
    let path: String
    let database: TaskDatabase

    /// One line for an error of the broker, with the cause's first line.
    static func describe(_ error: TaskBrokerError) -> String {
        var text = error.message
        if let underlying = error.underlying {
            let cause = String(describing: underlying).split(separator: "\n").first.map(String.init) ?? ""
            // A cause that only repeats the message (QueuePersistence's own error) adds nothing.
            if !cause.isEmpty, !cause.contains(text) { text += " (\(cause))" }
        }
        return text
    }

    /// Runs a storage call, turning the broker's errors into one-line tool errors.
    func run<T: Sendable>(_ what: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as TaskBrokerError {
            throw QueuekitError("could not \(what) in \(path): \(Store.describe(error))")
        } catch let error as DatabaseError {
            throw QueuekitError("could not \(what) in \(path): \(error.message ?? "\(error.resultCode)")")
        }
    }

    /// Every stored queue, sorted by name.
    func queues() async throws -> [QueueInfo] {
        try await run("read the queues") {
            try await database.snapshot().map {
                QueueInfo(name: $0.name, pending: $0.pending, attempts: $0.attempts, pause: $0.pause)
            }
        }
    }

    /// The stored actions of a queue, in order.
    func tasks(in queue: String) async throws -> [StoredTask] {
        try await run("read queue \(queue)") { try await database.storage.tasks(inQueue: queue) }
    }

    /// Decodes a stored upload.
    static func upload(from task: StoredTask) -> UploadAction? {
        try? JSONDecoder().decode(UploadAction.self, from: task.payload)
    }

    /// The queues of a user, named as the user typed it; fails with a one-line error when neither
    /// the live queue nor the dead-letter queue has anything stored.
    func resolve(queue name: String) async throws -> (user: String, live: QueueInfo?, deadLetter: QueueInfo?) {
        let user = QueueNames.user(of: name)
        let all = try await queues()
        let live = all.first { $0.name == QueueNames.live(user) }
        let dead = all.first { $0.name == QueueNames.deadLetter(user) }
        guard live != nil || dead != nil else {
            throw QueuekitError("no queue named '\(name)' in \(path); `queuekit stats` lists the queues.")
        }
        return (user, live, dead)
    }
}
