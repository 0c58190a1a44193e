import Foundation
import TaskBroker
import Testing

/// `queuekit`'s operator commands on a database of another application: its own action type,
/// queue names and collections, nothing of the demo's.
@Suite(.timeLimit(.minutes(1)))
struct QueuekitOperatorTests {
    struct Mail: TaskQueueAction {
        var key: String
        var collection = "mail"
        var queueName: String
        var to: String
        var body: String
    }

    /// Dead-letters every action it is given.
    final class Refuser: AsyncTaskQueueHandler {
        func handle(_ action: Mail, context _: TaskContext) async -> TaskResult {
            .deadLetter(reason: "no such address: \(action.to)")
        }
    }

    @Test func everyOperatorCommandWorksByQueueNameAndKeyOnAnotherApplicationsDatabase() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("app.sqlite")
        let db = ["--database", "sqlite:\(path)"]
        let database = try await TaskDatabase.sqlite(path: path)
        // A dead letter, through a broker of the application's own.
        let broker = try await TaskQueueBroker.setup(database: database, name: "mail", handler: Refuser())
        let events = broker.events
        try await database.save(Mail(key: "bad", queueName: "mail-7", to: "nowhere", body: "hello"))
        for await event in events {
            if case .deadLettered = event { break }
        }
        await broker.shutdown()
        let long = String(repeating: "Lorem ipsum ", count: 20)
        try await database.save([
            Mail(key: "m1", queueName: "mail-42", to: "ann@example.com", body: "short"),
            Mail(key: "m2", queueName: "mail-42", to: "bob@example.com", body: long),
        ])

        try await database.saveParallel([
            Mail(key: "news-1", queueName: "mail-news", to: "ann@example.com", body: "news"),
            Mail(key: "news-2", queueName: "mail-news", to: "bob@example.com", body: "news"),
        ])

        let queues = try await QueuekitBinary.run(["queues", "--json"] + db, in: folder.url)
        #expect(queues.status == 0, "\(queues.stderr)")
        let rows = try JSONDecoder().decode([QueueRow].self, from: Data(queues.stdout.utf8))
        #expect(rows.map(\.name) == ["mail-42", "mail-7", "mail-news"])
        #expect(rows.map(\.pending) == [2, 0, 0])
        #expect(rows.map(\.parallelPending) == [0, 0, 2], "plain parallel actions are counted apart")
        #expect(rows.map(\.deadLetters) == [0, 1, 0])
        // How long the oldest pending action has waited: saved moments ago; none in an empty queue.
        #expect(rows[0].oldestAgeSeconds.map { $0 >= 0 && $0 < 600 } == true, "\(queues.stdout)")
        #expect(rows[1].oldestAgeSeconds == nil, "\(queues.stdout)")
        let table = try await QueuekitBinary.run(["queues"] + db, in: folder.url)
        #expect(table.stdout.contains("OLDEST") && table.stdout.contains("PARALLEL"), "\(table.stdout)")
        let parallel = try await QueuekitBinary.run(["show", "news-2", "--collection", "mail"] + db, in: folder.url)
        #expect(parallel.stdout.hasPrefix("mail/news-2 in mail-news: "), "a plain parallel action is shown by its key: \(parallel.stdout)")

        let actions = try await QueuekitBinary.run(["actions", "mail-42"] + db, in: folder.url)
        #expect(actions.status == 0, "\(actions.stderr)")
        #expect(actions.stdout.contains("mail/m1"), "\(actions.stdout)")
        #expect(actions.stdout.contains(#"{"body":"short","collection":"mail","key":"m1","queueName":"mail-42","to":"ann@example.com"}"#), "\(actions.stdout)")
        #expect(actions.stdout.contains("--full shows all"), "the long payload is cut: \(actions.stdout)")
        let full = try await QueuekitBinary.run(["actions", "mail-42", "--full"] + db, in: folder.url)
        #expect(full.stdout.contains(long), "\(full.stdout)")
        let json = try await QueuekitBinary.run(["actions", "mail-42", "--json"] + db, in: folder.url)
        let listed = try JSONDecoder().decode([ActionRow].self, from: Data(json.stdout.utf8))
        #expect(listed.map(\.key) == ["m1", "m2"])
        #expect(listed.last?.payload["body"] == long)

        let dead = try await QueuekitBinary.run(["dead-letters", "--json"] + db, in: folder.url)
        let letters = try JSONDecoder().decode([DeadLetterRow].self, from: Data(dead.stdout.utf8))
        #expect(letters.map(\.key) == ["bad"])
        #expect(letters.first?.reason == "no such address: nowhere")
        #expect(letters.first?.queue == "mail-7")

        let shown = try await QueuekitBinary.run(["show", "bad", "--collection", "mail"] + db, in: folder.url)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.hasPrefix("mail/bad in mail-7: dead letter\n"), "\(shown.stdout)")
        #expect(shown.stdout.contains("no such address: nowhere"), "\(shown.stdout)")
        #expect(shown.stdout.contains(#""to" : "nowhere""#), "the payload, pretty-printed: \(shown.stdout)")
        let shownJSON = try await QueuekitBinary.run(["show", "m2", "--collection", "mail", "--json"] + db, in: folder.url)
        let record = try JSONDecoder().decode(ShowRecord.self, from: Data(shownJSON.stdout.utf8))
        #expect(record.state == "live" && record.queue == "mail-42" && record.payload["body"] == long)
        let missing = try await QueuekitBinary.run(["show", "gone", "--collection", "mail"] + db, in: folder.url)
        #expect(missing.status == 1 && missing.stderrLines.count == 1, "\(missing.stderr)")

        let paused = try await QueuekitBinary.run(["pause", "mail-42"] + db, in: folder.url)
        #expect(paused.stdout.contains("paused mail-42"), "\(paused.stdout)")
        #expect(try await database.snapshot().first { $0.name == "mail-42" }?.pausedByOperator == true)

        let replay = try await QueuekitBinary.run(["replay", "bad", "--collection", "mail"] + db, in: folder.url)
        #expect(replay.stdout == "replayed mail/bad\n", "\(replay.stderr)")
        let again = try await QueuekitBinary.run(["replay", "bad", "--collection", "mail"] + db, in: folder.url)
        #expect(again.status == 1)
        #expect(again.stderr.hasPrefix("queuekit: no dead letter mail/bad in "), "\(again.stderr)")
        #expect(try await database.storage.tasks(inQueue: "mail-7").map(\.key) == ["bad"])

        let deleted = try await QueuekitBinary.run(["delete", "m1", "--collection", "mail"] + db, in: folder.url)
        #expect(deleted.stdout == "deleted mail/m1\n", "\(deleted.stderr)")
        #expect(try await database.storage.tasks(inQueue: "mail-42").map(\.key) == ["m2"])
        let discard = try await QueuekitBinary.run(["discard", "m2", "--collection", "mail"] + db, in: folder.url)
        #expect(discard.status == 1, "m2 is not a dead letter: \(discard.stdout)")
        #expect(try await database.storage.tasks(inQueue: "mail-42").map(\.key) == ["m2"], "and it stays stored")
    }

    struct QueueRow: Decodable {
        var name: String
        var pending: Int
        var parallelPending: Int
        var deadLetters: Int
        var oldestAgeSeconds: Double?
    }

    struct ActionRow: Decodable {
        var key: String
        var payload: [String: String]
    }

    struct ShowRecord: Decodable {
        var state: String
        var queue: String
        var payload: [String: String]
    }

    struct DeadLetterRow: Decodable {
        var key: String
        var queue: String
        var reason: String
    }
}
