import ArgumentParser
import Foundation
import TaskBroker

// Operator commands for any TaskBroker database, whatever the application's action types:
// queues, actions and dead letters by name and key, payloads as stored (JSON).

/// `--json` and how payloads are shown, shared by the listing commands.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Machine-readable output: one JSON document on stdout.")
    var json = false

    @Flag(help: "Show payloads whole (they are cut at 100 characters otherwise).")
    var full = false

    init() {}

    init(json: Bool, full: Bool) {
        self.json = json
        self.full = full
    }

    /// The longest payload shown without `--full`.
    static let payloadWidth = 100

    /// A payload as one line of compact JSON, cut unless `--full`.
    func line(_ payload: Data) -> String {
        let text = JSONValue.compactText(payload)
        guard !full, text.count > Self.payloadWidth else { return text }
        return String(text.prefix(Self.payloadWidth)) + "… (\(grouped(payload.count)) bytes; --full shows all)"
    }

    /// Writes `value` as pretty, key-sorted JSON.
    func print<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        say(String(decoding: try encoder.encode(value), as: UTF8.self))
    }
}

/// `queuekit queues`: every queue at a glance.
struct Queues: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every queue: pending actions (and plain parallel ones), how long its oldest has waited, dead letters, failures of its head, paused or ready."
    )

    @OptionGroup var options: DatabaseOptions
    @OptionGroup var output: OutputOptions

    struct Row: Codable {
        var name: String
        var pending: Int
        /// Plain parallel actions with this queue name, not yet done.
        var parallelPending: Int
        var deadLetters: Int
        var headFailures: Int
        var pausedByOperator: Bool
        var pausedUntil: Date?
        var pausedUntilRestart: Bool
        var lastFailure: String?
        /// When the longest-waiting pending action was saved, and how many seconds ago.
        var oldestSavedAt: Date?
        var oldestAgeSeconds: Double?
    }

    func run() async throws {
        let store = try await options.open(create: false, readOnly: true)
        let now = Date()
        let rows = try await store.run("read the queues") { try await store.database.snapshot() }.map { queue in
            Row(
                name: queue.name, pending: queue.pending, parallelPending: queue.parallelPending, deadLetters: queue.deadLetters,
                headFailures: queue.attempts,
                pausedByOperator: queue.pausedByOperator, pausedUntil: queue.pausedUntil,
                pausedUntilRestart: queue.pause == .untilRestart, lastFailure: queue.lastFailure?.reason,
                oldestSavedAt: queue.oldestSavedAt, oldestAgeSeconds: queue.oldestSavedAt.map { max(0, now.timeIntervalSince($0)) }
            )
        }
        if output.json { return try output.print(rows) }
        guard !rows.isEmpty else { return say("no queues") }
        let width = max(12, (rows.map(\.name.count).max() ?? 0) + 2)
        say("QUEUE".padding(toLength: width, withPad: " ", startingAt: 0) + "PENDING  PARALLEL    OLDEST   DEAD  FAILURES  STATE")
        for row in rows {
            let state = row.pausedByOperator ? "paused by an operator"
                : row.pausedUntilRestart ? "paused until restarted"
                : row.pausedUntil.map { "retry at \(ISO8601DateFormatter().string(from: $0))" }
                ?? (row.pending + row.parallelPending > 0 ? "ready" : "empty")
            say(row.name.padding(toLength: width, withPad: " ", startingAt: 0) + leftPad(grouped(row.pending), 7)
                + leftPad(grouped(row.parallelPending), 10)
                + leftPad(row.oldestAgeSeconds.map(Self.age) ?? "-", 10) + leftPad(grouped(row.deadLetters), 7) + leftPad(String(row.headFailures), 10) + "  " + state
                + (row.lastFailure.map { " (last failure: \($0))" } ?? ""))
        }
    }
}

extension Queues {
    /// An age as an operator reads it: `42s`, `3m05s`, `2h07m`, `3d04h`.
    static func age(_ seconds: Double) -> String {
        // A time no clock gives (a damaged row): shown as unknown, not trapped on.
        guard seconds.isFinite, seconds < 1e12 else { return "?" }
        let whole = Int(seconds.rounded(.down))
        switch whole {
        case ..<60: return "\(whole)s"
        case ..<3600: return "\(whole / 60)m" + String(format: "%02ds", whole % 60)
        case ..<86_400: return "\(whole / 3600)h" + String(format: "%02dm", whole % 3600 / 60)
        default: return "\(whole / 86_400)d" + String(format: "%02dh", whole % 86_400 / 3600)
        }
    }
}

/// `queuekit actions QUEUE`: a queue's stored actions in order.
struct Actions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List a queue's stored actions in the order they run, with their payloads.")

    @OptionGroup var options: DatabaseOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The queue's name, exactly as stored.")
    var queue: String

    @Option(help: "At most this many actions (0: all).")
    var limit = 50

    struct Row: Codable {
        var key: String
        var collection: String
        var attempts: Int
        var priority: Int
        var notBefore: Date?
        var lastFailure: String?
        var payload: JSONValue
    }

    func run() async throws {
        let store = try await options.open(create: false, readOnly: true)
        let tasks = try await store.tasks(in: queue)
        let shown = limit > 0 ? Array(tasks.prefix(limit)) : tasks
        if output.json {
            return try output.print(shown.map {
                Row(
                    key: $0.key, collection: $0.collection, attempts: $0.attempts, priority: $0.priority,
                    notBefore: $0.notBefore, lastFailure: $0.lastFailure?.reason, payload: JSONValue($0.payload)
                )
            })
        }
        guard !tasks.isEmpty else { return say("no stored actions in '\(queue)'") }
        say("\(queue): \(grouped(tasks.count)) action(s)")
        for task in shown {
            var detail = "\(task.collection)/\(task.key)"
            if task.attempts > 0 { detail += ", \(task.attempts) failed attempt(s)" }
            if task.priority != 0 { detail += ", priority \(task.priority)" }
            if let notBefore = task.notBefore, notBefore > Date() { detail += ", starts \(ISO8601DateFormatter().string(from: notBefore))" }
            say("  \(detail)")
            say("    \(output.line(task.payload))")
        }
        if shown.count < tasks.count { say("  … \(grouped(tasks.count - shown.count)) more (--limit 0 shows all)") }
    }
}

/// `queuekit dead-letters`: what failed for good.
struct DeadLetters: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dead-letters", abstract: "List the dead letters (of one queue, or of all), with their reasons."
    )

    @OptionGroup var options: DatabaseOptions
    @OptionGroup var output: OutputOptions

    @Option(help: "Only this queue (its name exactly as stored).")
    var queue: String?

    struct Row: Codable {
        var key: String
        var collection: String
        var queue: String
        var attempts: Int
        var reason: String
        var failedAt: Date
        var payload: JSONValue
    }

    func run() async throws {
        let store = try await options.open(create: false, readOnly: true)
        let letters = try await store.deadLetters(in: queue)
        if output.json {
            return try output.print(letters.map {
                Row(
                    key: $0.key, collection: $0.collection, queue: $0.queueName, attempts: $0.attempts, reason: $0.reason,
                    failedAt: $0.failedAt, payload: JSONValue($0.payload)
                )
            })
        }
        guard !letters.isEmpty else { return say("no dead letters") }
        for letter in letters {
            say("\(letter.queueName)  \(letter.collection)/\(letter.key)  \(letter.attempts) attempt(s), "
                + "\(ISO8601DateFormatter().string(from: letter.failedAt)): \(letter.reason)")
            say("    \(output.line(letter.payload))")
        }
    }
}

/// `queuekit show KEY --collection C`: one action, whole.
struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show one stored action by key and collection: its queue, state, attempts, last failure and payload."
    )

    @OptionGroup var options: DatabaseOptions
    @OptionGroup var action: ActionAddress

    @Flag(help: "Machine-readable output: one JSON document on stdout.")
    var json = false

    struct Record: Codable {
        var key: String
        var collection: String
        var queue: String
        var state: String
        var attempts: Int
        var priority: Int
        var notBefore: Date?
        var pausedUntil: Date?
        var pausedUntilRestart: Bool
        var lastFailure: String?
        var failedAt: Date?
        var payload: JSONValue
    }

    func run() async throws {
        let store = try await options.open(create: false, readOnly: true)
        let (key, collection) = (action.key, action.collection)
        guard let found = try await store.run("find \(collection)/\(key)", { try await store.database.lookup(key: key, collection: collection) }) else {
            throw QueuekitError("no action \(collection)/\(key) in \(store.name) (done, deleted, or never saved).")
        }
        let task = found.task
        var pausedUntil: Date?
        if case .until(let date)? = task.pause { pausedUntil = date }
        let state = if case .deadLetter = found { "dead letter" } else { "live" }
        let record = Record(
            key: task.key, collection: task.collection, queue: task.queueName, state: state,
            attempts: task.attempts, priority: task.priority, notBefore: task.notBefore, pausedUntil: pausedUntil,
            pausedUntilRestart: task.pause == .untilRestart, lastFailure: task.lastFailure?.reason,
            failedAt: task.lastFailure?.failedAt, payload: JSONValue(task.payload)
        )
        if json { return try OutputOptions(json: true, full: true).print(record) }
        let time = ISO8601DateFormatter()
        say("\(collection)/\(key) in \(task.queueName): \(record.state)")
        say("  attempts      \(task.attempts)")
        if task.priority != 0 { say("  priority      \(task.priority)") }
        if let notBefore = task.notBefore { say("  not before    \(time.string(from: notBefore))") }
        if let pausedUntil { say("  paused until  \(time.string(from: pausedUntil))") }
        if record.pausedUntilRestart { say("  paused until  restarted (`queuekit retry` or restartQueues)") }
        if let failure = task.lastFailure { say("  last failure  \(time.string(from: failure.failedAt)): \(failure.reason)") }
        say("  payload")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let pretty = (try? encoder.encode(record.payload)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        for line in pretty.split(separator: "\n", omittingEmptySubsequences: false) {
            say("    \(line)")
        }
    }
}

/// What `show`, `replay`, `discard` and `delete` take: one action by key and collection.
struct ActionAddress: ParsableArguments {
    @Argument(help: "The action's key.")
    var key: String

    @Option(help: "The action's collection.")
    var collection: String

    /// Runs `change` on the action (`verb` and `done` in messages: "replay" and "replayed") and
    /// says what was done, or fails with one line naming what is missing and how to list it.
    func apply(
        _ verb: String, done: String, in store: Store, missing: String, listedBy: String,
        _ change: @escaping @Sendable (TaskDatabase, String, String) async throws -> Bool
    ) async throws {
        let (key, collection) = (self.key, self.collection)
        guard try await store.run("\(verb) \(collection)/\(key)", { try await change(store.database, key, collection) }) else {
            throw QueuekitError("no \(missing) \(collection)/\(key) in \(store.name); \(listedBy)")
        }
        say("\(done) \(collection)/\(key)")
    }
}

/// `queuekit replay KEY --collection C`.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Put a dead letter back in its queue, at its place, with its attempts from zero."
    )

    @OptionGroup var options: DatabaseOptions
    @OptionGroup var action: ActionAddress

    func run() async throws {
        let store = try await options.open(create: false)
        try await action.apply("replay", done: "replayed", in: store, missing: "dead letter", listedBy: "`queuekit dead-letters` lists them.") { database, key, collection in
            try await database.replayDeadLetter(key: key, collection: collection)
        }
    }
}

/// `queuekit discard KEY --collection C`.
struct Discard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete a dead letter.")

    @OptionGroup var options: DatabaseOptions
    @OptionGroup var action: ActionAddress

    func run() async throws {
        let store = try await options.open(create: false)
        try await action.apply("discard", done: "discarded", in: store, missing: "dead letter", listedBy: "`queuekit dead-letters` lists them.") { database, key, collection in
            try await database.discardDeadLetter(key: key, collection: collection)
        }
    }
}

/// `queuekit delete KEY --collection C`.
struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete (cancel) a stored action or dead letter; a run of it in progress is not stored."
    )

    @OptionGroup var options: DatabaseOptions
    @OptionGroup var action: ActionAddress

    func run() async throws {
        let store = try await options.open(create: false)
        try await action.apply("delete", done: "deleted", in: store, missing: "action", listedBy: "`queuekit actions QUEUE` lists a queue's.") { database, key, collection in
            try await database.delete(key: key, collection: collection)
        }
    }
}

private func leftPad(_ text: String, _ width: Int) -> String {
    String(repeating: " ", count: max(0, width - text.count)) + text
}
