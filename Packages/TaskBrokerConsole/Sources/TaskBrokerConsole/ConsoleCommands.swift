import TaskBroker

/// The operator's commands (`POST`, each with the console's CSRF token): each returns the page
/// to show next.
struct ConsoleCommands: Sendable {
    let console: TaskBrokerConsole

    /// The commands, by the path they are posted to.
    enum Command: String, CaseIterable, Sendable {
        case pause, resume, purge, replay, discard, delete
    }

    func run(_ command: Command, _ form: ConsoleForm) async throws -> String {
        let database = console.database
        switch command {
        case .pause, .resume, .purge:
            let queue = try form.required("queue")
            switch command {
            case .pause: try await database.pauseQueues([queue])
            case .resume: try await database.resumeQueues([queue])
            default: _ = try await database.purge(queueName: queue)
            }
            return console.link("queue", [("name", queue)])
        case .replay, .discard, .delete:
            let key = try form.required("key")
            let collection = try form.required("collection")
            let done: Bool
            switch command {
            case .replay: done = try await database.replayDeadLetter(key: key, collection: collection)
            case .discard: done = try await database.discardDeadLetter(key: key, collection: collection)
            default: done = try await database.delete(key: key, collection: collection)
            }
            guard done else {
                let what = command == .delete ? "stored action" : "dead letter"
                throw ConsoleError.notFound("No \(what) with key \"\(key)\" in collection \"\(collection)\": it may have run, or another operator got there first.")
            }
            return command == .replay ? console.link("action", [("key", key), ("collection", collection)]) : console.link("dead-letters")
        }
    }
}
