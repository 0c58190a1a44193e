import ArgumentParser
import Foundation
import ObjectDataSource
import TaskBroker

/// `queuekit enqueue`: store uploads on one user's queue.
struct Enqueue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Enqueue simulated uploads on a user's queue.")

    @OptionGroup var options: DatabaseOptions

    @Option(help: "The user (or queue uploads-USER) to enqueue on.")
    var queue: String

    @Option(help: "How many uploads.")
    var count = 1

    @Option(help: "Each upload fails this many times before it succeeds.")
    var failTimes = 0

    @Flag(help: "The uploads always fail (they end in the dead-letter queue).")
    var permanent = false

    @Option(help: "Key prefix of the new uploads (keys are PREFIX-1, PREFIX-2, …); saving an existing key replaces it.")
    var keyPrefix: String?

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1.") }
        guard failTimes >= 0 else { throw ValidationError("--fail-times cannot be negative.") }
        let user = QueueNames.user(of: queue)
        guard !user.isEmpty, !QueueNames.isDeadLetter(queue),
              user.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." })
        else {
            throw ValidationError("--queue takes a user name of letters, digits, '-', '_' or '.' (got '\(queue)').")
        }
    }

    func run() async throws {
        let store = try await options.open(create: true)
        let user = QueueNames.user(of: queue)
        let prefix = keyPrefix ?? "\(user)-\(UUID().uuidString.prefix(8).lowercased())"
        let actions = (1...count).map { index in
            UploadAction(
                key: "\(prefix)-\(index)", user: user, file: "FILE_\(pad(index, 4)).jpg", bytes: 1_000_000 + index,
                transientFailures: failTimes, failsPermanently: permanent
            )
        }
        try await store.run("enqueue") { try await store.database.save(actions) }
        say("enqueued \(count) upload(s) on \(QueueNames.live(user))")
    }
}

/// `queuekit work`: run the stored uploads to the end.
struct Work: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run every stored upload until none is left (Ctrl-C stops cleanly; run again to continue).",
        discussion: """
            On a PostgreSQL --database, start `queuekit work` on as many machines as you like: \
            each user's uploads still run one at a time, in order, and a worker that dies loses \
            its queues to the others after the lease (10 s by default; ?lease=SECONDS in the URL).
            """
    )

    @OptionGroup var options: DatabaseOptions

    @OptionGroup var work: WorkOptions

    @Option(help: ArgumentHelp(
        "Write a line for each attempt's start and end to FILE (for scripts that check a cluster run).",
        valueName: "FILE"
    ))
    var traceFile: String?

    @Flag(help: "Keep running when no upload is left, taking those that other processes enqueue, until SIGINT or SIGTERM.")
    var watch = false

    func run() async throws {
        let store = try await options.open(create: false)
        let settings = work.settings(maxAttempts: work.maxAttempts)
        let trace = try traceFile.map { path throws(QueuekitError) in try TraceLog(path: path) }
        let report = try await Runner.run(
            store: store, settings: settings, concurrency: work.concurrency, title: "work", trace: trace, watch: watch
        )
        let c = report.counts
        say("handled \(c.handled): \(c.uploaded) uploaded, \(c.deadLettered) dead-lettered, \(c.retries) retries"
            + (report.interrupted && !watch ? " (interrupted; run again to continue)" : ""))
        // A signal is how a watching worker is meant to stop.
        if report.interrupted, !watch { throw ExitCode(130) }
        if let stuck = report.stuckError { throw stuck }
    }
}

/// One row of `queuekit list`.
struct ListedUpload: Sendable {
    var key: String
    var detail: String
}

/// `queuekit list`: the stored uploads, one section per queue.
struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the stored uploads, one section per queue.")

    @OptionGroup var options: DatabaseOptions

    @Option(help: "Only this queue (a user, uploads-USER or deadletter-USER).")
    var queue: String?

    @Flag(help: "Only the dead-letter queues.")
    var deadLetter = false

    @Option(help: "At most this many uploads per queue (0: all).")
    var limit = 10

    func run() async throws {
        let store = try await options.open(create: false)
        var queues = try await store.queues()
        if let queue {
            let resolved = try await store.resolve(queue: queue)
            let exact = queues.first { $0.name == queue }
            queues = exact.map { [$0] } ?? [resolved.live, resolved.deadLetter].compactMap { $0 }
        }
        if deadLetter { queues = queues.filter(\.isDeadLetter) }
        // Each queue is a section of an ObjectDataSource; the sections are concatenated.
        var sections: [any ObjectDataSource<ListedUpload>] = []
        for info in queues {
            let tasks = try await store.tasks(in: info.name)
            let rows = tasks.map { task -> ListedUpload in
                guard let upload = Store.upload(from: task) else {
                    return ListedUpload(key: task.key, detail: "(not an upload action)")
                }
                var detail = "\(upload.file), \(grouped(upload.bytes)) bytes"
                if task.attempts > 0 { detail += ", \(task.attempts) failed attempt(s)" }
                if let attempts = upload.attempts, let error = upload.lastError {
                    detail += ", dead after \(attempts) attempts: \(error)"
                }
                return ListedUpload(key: task.key, detail: detail)
            }
            sections.append(ArrayObjectDataSource(objects: rows, sectionName: "\(info.name) (\(grouped(info.pending)))\(describe(info.pause))"))
        }
        let dataSource = ConcatenatingObjectDataSource(dataSources: sections)
        if dataSource.numberOfSections() == 0 {
            say("no stored uploads")
            return
        }
        for section in 0..<dataSource.numberOfSections() {
            say(dataSource.titleOfSection(section) ?? "")
            let count = dataSource.numberOfObjectsInSection(section)
            let shown = limit > 0 ? min(limit, count) : count
            for row in 0..<shown {
                let upload = try dataSource.objectAt(IndexPath(row: row, section: section))
                say("  \(upload.key)  \(upload.detail)")
            }
            if shown < count { say("  … \(grouped(count - shown)) more (--limit 0 shows all)") }
        }
    }
}

/// How a paused queue is shown.
func describe(_ pause: TaskPause?) -> String {
    switch pause {
    case .none: ""
    case .until(let date):
        date.timeIntervalSinceNow > 0.05
            ? " paused, retry in \(String(format: "%.1f", date.timeIntervalSinceNow)) s" : " paused, retry due now"
    case .untilRestart: " paused until `queuekit retry`"
    }
}

/// `queuekit stats`: the queues at a glance.
struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show every queue: pending uploads, failures of its head, pauses, dead letters.")

    @OptionGroup var options: DatabaseOptions

    func run() async throws {
        let store = try await options.open(create: false)
        let queues = try await store.queues()
        let live = queues.filter { !$0.isDeadLetter }
        let dead = queues.filter(\.isDeadLetter)
        let width = max(24, (queues.map(\.name.count).max() ?? 0) + 2)
        say("QUEUE".padding(toLength: width, withPad: " ", startingAt: 0) + "PENDING  HEAD FAILURES  STATE")
        for queue in queues {
            let state = queue.isDeadLetter ? "dead letters" : queue.pause == nil ? "ready" : describe(queue.pause).trimmingCharacters(in: .whitespaces)
            say(queue.name.padding(toLength: width, withPad: " ", startingAt: 0)
                + leftPad(grouped(queue.pending), 7) + leftPad(queue.isDeadLetter ? "-" : String(queue.attempts), 15) + "  " + state)
        }
        let pending = live.reduce(0) { $0 + $1.pending }
        let deadCount = dead.reduce(0) { $0 + $1.pending }
        say("total: \(live.count) queue(s), \(grouped(pending)) pending, \(live.filter { $0.pause != nil }.count) paused, \(grouped(deadCount)) dead-lettered")
        if let ledger = try await DemoLedger.load(from: store) {
            say("demo: \(grouped(ledger.enqueued)) of \(grouped(ledger.workload.total)) uploads enqueued (seed \(ledger.workload.seed)), \(ledger.runs) run(s)")
        }
    }

    private func leftPad(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }
}

/// `queuekit retry <queue>`: give a queue's failures another go.
struct Retry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Move a queue's dead letters back to its live queue and run a paused queue's head now."
    )

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "The queue: a user, uploads-USER or deadletter-USER.")
    var queue: String

    @Flag(help: "Pretend the cause is fixed: the revived uploads succeed next time.")
    var simulateFix = false

    func run() async throws {
        let store = try await options.open(create: false)
        let resolved = try await store.resolve(queue: queue)
        var moved = 0
        if let dead = resolved.deadLetter {
            let tasks = try await store.tasks(in: dead.name)
            var revived: [UploadAction] = []
            var old: [ActionKey] = []
            for task in tasks {
                guard let upload = Store.upload(from: task) else { continue }
                revived.append(upload.revived(fixed: simulateFix))
                old.append(ActionKey(key: task.key, collection: task.collection))
            }
            try await store.run("move dead letters back") { try await store.backend.replace(old, with: revived) }
            moved = revived.count
        }
        let live = QueueNames.live(resolved.user)
        try await store.run("restart \(live)") { try await store.database.restartQueues([live]) }
        say("\(live): \(moved) dead letter(s) moved back, queue restarted; `queuekit work` runs them")
    }
}

/// `queuekit purge`: delete stored uploads.
struct Purge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete every stored upload of a queue (live and dead letters), or of all queues.")

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "The queue: a user, uploads-USER or deadletter-USER.")
    var queue: String?

    @Flag(help: "Purge every queue.")
    var all = false

    func validate() throws {
        guard (queue == nil) != (!all) || (queue != nil && !all) else {
            throw ValidationError("name one queue, or pass --all.")
        }
        if queue != nil && all { throw ValidationError("name one queue or pass --all, not both.") }
    }

    func run() async throws {
        let store = try await options.open(create: false)
        var names: [String]
        if all {
            names = try await store.queues().map(\.name)
        } else {
            let resolved = try await store.resolve(queue: queue ?? "")
            names = [resolved.live?.name, resolved.deadLetter?.name].compactMap { $0 }
        }
        var total = 0
        var demo = 0
        for name in names {
            demo += try await store.tasks(in: name).filter { $0.key.hasPrefix(Workload.keyPrefix) }.count
            total += try await store.run("purge \(name)") { try await store.database.purge(queueName: name) }
        }
        if demo > 0 { try await DemoLedger.add(demo, to: .purged, in: store) }
        say("purged \(grouped(total)) upload(s) from \(names.count) queue(s)")
    }
}
