import ArgumentParser
import TaskBroker

/// `queuekit pause <queue>…`: stop queues from starting uploads, in every worker.
struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause queues: no worker starts their uploads (a running one finishes) until `queuekit resume`.",
        discussion: "The pause is stored in the database: it holds in every worker and across restarts; new uploads are still stored."
    )

    @OptionGroup var options: DatabaseOptions

    @OptionGroup var list: QueueList

    func run() async throws {
        let store = try await options.open(create: false)
        let names = try await store.queueNames(for: list.queues)
        try await store.run("pause \(names.joined(separator: ", "))") { try await store.database.pauseQueues(names) }
        say("paused \(names.joined(separator: ", ")); `queuekit resume` runs \(names.count == 1 ? "it" : "them") again")
    }
}

/// `queuekit resume <queue>…`: undo `queuekit pause`.
struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Resume queues paused with `queuekit pause`: workers run them again.")

    @OptionGroup var options: DatabaseOptions

    @OptionGroup var list: QueueList

    func run() async throws {
        let store = try await options.open(create: false)
        let names = try await store.queueNames(for: list.queues)
        try await store.run("resume \(names.joined(separator: ", "))") { try await store.database.resumeQueues(names) }
        say("resumed \(names.joined(separator: ", "))")
    }
}

/// The queues `pause` and `resume` take (at least one: the argument is required).
struct QueueList: ParsableArguments {
    @Argument(help: "The queues: names as stored, or the demo's users (alice for uploads-alice).")
    var queues: [String]
}
