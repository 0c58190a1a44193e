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

    @Option(help: ArgumentHelp("Store the uploads now and start them no earlier than SECONDS from now.", valueName: "SECONDS"))
    var delay: Double?

    /// The longest `--delay`: a year.
    static let maximumDelay = 366.0 * 86_400

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1.") }
        guard failTimes >= 0 else { throw ValidationError("--fail-times cannot be negative.") }
        if let delay, !(0...Self.maximumDelay).contains(delay) {
            throw ValidationError("--delay takes seconds from 0 to \(Int(Self.maximumDelay)) (a year); got \(delay).")
        }
        let user = QueueNames.user(of: queue)
        guard !user.isEmpty,
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
        if let delay {
            let date = Date(timeIntervalSinceNow: delay)
            try await store.run("enqueue") { try await store.database.save(actions, notBefore: date) }
            say("enqueued \(count) upload(s) on \(QueueNames.live(user)), to start in \(String(format: "%.1f", delay)) s")
        } else {
            try await store.run("enqueue") { try await store.database.save(actions) }
            say("enqueued \(count) upload(s) on \(QueueNames.live(user))")
        }
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

    @Option(help: ArgumentHelp(
        "Serve GET /metrics (Prometheus: the broker's counters, timers and running actions, the queues' gauges) on HOST:PORT while working.",
        valueName: "HOST:PORT"
    ))
    var metrics: String?

    func run() async throws {
        let store = try await options.open(create: false)
        #if !Console
        if metrics != nil {
            throw QueuekitError(
                "--metrics: this queuekit was built without the web console and metrics (as `make demo` builds it); "
                    + "build it with them: swift build -c release --package-path Integration --product queuekit",
                exitCode: 64
            )
        }
        #endif
        let settings = work.settings(maxAttempts: work.maxAttempts)
        let trace = try traceFile.map { path throws(QueuekitError) in try TraceLog(path: path) }
        let run = {
            try await Runner.run(store: store, settings: settings, concurrency: work.concurrency, title: "work", trace: trace, watch: watch)
        }
        #if Console
        let report = try await MetricsEndpoint.serving(listen: metrics, database: store.database, run)
        #else
        let report = try await run()
        #endif
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
    static let configuration = CommandConfiguration(abstract: "List the stored uploads, one section per queue, then the dead letters.")

    @OptionGroup var options: DatabaseOptions

    @Option(help: "Only this queue (a user or uploads-USER).")
    var queue: String?

    @Flag(help: "Only the dead letters.")
    var deadLetter = false

    @Option(help: "At most this many uploads per section (0: all).")
    var limit = 10

    func run() async throws {
        let store = try await options.open(create: false)
        var queues = try await store.queues()
        if let queue {
            queues = [try await store.resolve(queue: queue).info]
        }
        // Each queue is a section of an ObjectDataSource; the sections are concatenated.
        var sections: [any ObjectDataSource<ListedUpload>] = []
        for info in queues where !deadLetter && info.pending > 0 {
            let rows = try await store.tasks(in: info.name).map { task -> ListedUpload in
                guard let upload = Store.upload(from: task.payload) else {
                    return ListedUpload(key: task.key, detail: "(not an upload action)")
                }
                var detail = "\(upload.file), \(grouped(upload.bytes)) bytes"
                if let notBefore = task.notBefore, notBefore.timeIntervalSinceNow > 0 {
                    detail += ", starts in \(String(format: "%.1f", notBefore.timeIntervalSinceNow)) s"
                }
                if task.attempts > 0 { detail += ", \(task.attempts) failed attempt(s)" }
                return ListedUpload(key: task.key, detail: detail)
            }
            let state = info.pausedByOperator ? " paused by an operator" : describe(info.pause)
            sections.append(ArrayObjectDataSource(objects: rows, sectionName: "\(info.name) (\(grouped(info.pending)))\(state)"))
        }
        let deadLetters = try await store.deadLetters(in: queue.map { QueueNames.live(QueueNames.user(of: $0)) })
        if !deadLetters.isEmpty {
            let rows = deadLetters.map { dead -> ListedUpload in
                let file = Store.upload(from: dead.payload)?.file ?? "(not an upload action)"
                return ListedUpload(key: dead.key, detail: "\(dead.queueName), \(file), dead after \(dead.attempts) attempt(s): \(dead.reason)")
            }
            sections.append(ArrayObjectDataSource(objects: rows, sectionName: "dead letters (\(grouped(rows.count)))"))
        }
        let dataSource = ConcatenatingObjectDataSource(dataSources: sections)
        if dataSource.numberOfSections() == 0 {
            say(deadLetter ? "no dead letters" : "no stored uploads")
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
    static let configuration = CommandConfiguration(abstract: "Show every queue: pending uploads, dead letters, failures of its head, pauses.")

    @OptionGroup var options: DatabaseOptions

    func run() async throws {
        let store = try await options.open(create: false)
        let queues = try await store.queues()
        let width = max(24, (queues.map(\.name.count).max() ?? 0) + 2)
        say("QUEUE".padding(toLength: width, withPad: " ", startingAt: 0) + "PENDING   DEAD  HEAD FAILURES  STATE")
        for queue in queues {
            let state = queue.pausedByOperator ? "paused by an operator"
                : queue.pause == nil ? (queue.pending > 0 ? "ready" : "empty")
                : describe(queue.pause).trimmingCharacters(in: .whitespaces)
            say(queue.name.padding(toLength: width, withPad: " ", startingAt: 0)
                + leftPad(grouped(queue.pending), 7) + leftPad(grouped(queue.deadLetters), 7)
                + leftPad(queue.pending > 0 ? String(queue.attempts) : "-", 15) + "  " + state)
        }
        let live = queues.filter { $0.pending > 0 }
        let pending = live.reduce(0) { $0 + $1.pending }
        let deadCount = queues.reduce(0) { $0 + $1.deadLetters }
        let paused = queues.filter { $0.pausedByOperator || $0.pause != nil }.count
        say("total: \(live.count) queue(s), \(grouped(pending)) pending, \(paused) paused, \(grouped(deadCount)) dead-lettered")
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
        abstract: "Replay a queue's dead letters (each at its place, attempts from zero) and run a paused head now."
    )

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "The queue: a user or uploads-USER.")
    var queue: String

    @Flag(help: "Pretend the cause is fixed: the replayed uploads succeed next time.")
    var simulateFix = false

    func run() async throws {
        let store = try await options.open(create: false)
        let (_, info) = try await store.resolve(queue: queue)
        var replayed = 0
        for dead in try await store.deadLetters(in: info.name) {
            if simulateFix, let upload = Store.upload(from: dead.payload) {
                // Saving over a dead letter's key replays it at its place, with the new payload.
                try await store.run("replay \(dead.key)") { try await store.database.save(upload.fixed()) }
                replayed += 1
            } else if try await store.run("replay \(dead.key)", {
                try await store.database.replayDeadLetter(key: dead.key, collection: dead.collection)
            }) {
                replayed += 1
            }
        }
        try await store.run("restart \(info.name)") { try await store.database.restartQueues([info.name]) }
        say("\(info.name): \(replayed) dead letter(s) replayed, queue restarted; `queuekit work` runs them")
    }
}

/// `queuekit purge`: delete stored uploads.
struct Purge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete every stored upload of a queue (dead letters too), or of all queues.")

    @OptionGroup var options: DatabaseOptions

    @Argument(help: "The queue: a user or uploads-USER.")
    var queue: String?

    @Flag(help: "Purge every queue.")
    var all = false

    func validate() throws {
        if queue != nil && all { throw ValidationError("name one queue or pass --all, not both.") }
        if queue == nil && !all { throw ValidationError("name one queue, or pass --all.") }
    }

    func run() async throws {
        let store = try await options.open(create: false)
        let names = all ? try await store.queues().map(\.name) : [try await store.resolve(queue: queue ?? "").info.name]
        var total = 0
        var demo = 0
        for name in names {
            let dead = try await store.deadLetters(in: name)
            demo += try await store.tasks(in: name).filter { $0.key.hasPrefix(Workload.keyPrefix) }.count
            demo += dead.filter { $0.key.hasPrefix(Workload.keyPrefix) }.count
            total += try await store.run("purge \(name)") { try await store.database.purge(queueName: name) } + dead.count
        }
        if demo > 0 { try await DemoLedger.add(demo, to: .purged, in: store) }
        say("purged \(grouped(total)) upload(s) from \(names.count) queue(s)")
    }
}
