import ArgumentParser
import Foundation
import TaskBroker

/// `queuekit demo`: enqueue a realistic workload and run it to the end, resumably.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Enqueue 10,000 simulated uploads over 50 user queues and run them, with retries and dead letters.",
        discussion: """
            Run it again after Ctrl-C (or a crash) and it resumes: nothing already done is \
            enqueued again, and stored retries keep their attempt counts. --fresh starts over.
            """
    )

    @OptionGroup var options: DatabaseOptions

    @Option(help: "How many uploads the workload has.")
    var actions = 10_000

    @Option(help: "How many users (one serial queue each).")
    var users = 50

    @Option(help: "Seed of the workload: the same seed gives the same uploads and failures.")
    var seed: UInt64 = 42

    @Option(help: "Share of uploads that fail a few times, then succeed.")
    var transientRate = 0.08

    @Option(help: "Share of uploads that always fail and end in a dead-letter queue.")
    var permanentRate = 0.002

    @OptionGroup var work: WorkOptions

    @Flag(help: "Delete the database file first and start a new workload.")
    var fresh = false

    func validate() throws {
        guard actions >= 0, users >= 1 else {
            throw ValidationError("--actions cannot be negative and --users must be at least 1.")
        }
        guard (0...1).contains(transientRate), (0...1).contains(permanentRate) else {
            throw ValidationError("--transient-rate and --permanent-rate are shares between 0 and 1.")
        }
    }

    func run() async throws {
        let path = try options.path()
        if fresh {
            for suffix in ["", "-wal", "-shm"] {
                try? FileManager.default.removeItem(atPath: path + suffix)
            }
        }
        let store = try await options.open(create: true)
        var workload = Workload(
            seed: seed, total: actions, users: users, transientRate: transientRate,
            permanentRate: permanentRate, maxAttempts: work.maxAttempts
        )
        var enqueued = 0
        if let ledger = try await DemoLedger.load(from: store) {
            if ledger.workload != workload {
                say("note: \(path) holds the workload of seed \(ledger.workload.seed) (\(grouped(ledger.workload.total)) uploads); resuming it (--fresh starts over).")
            }
            workload = ledger.workload
            enqueued = ledger.enqueued
            if enqueued > 0 { say("resuming: \(grouped(enqueued)) of \(grouped(workload.total)) uploads were enqueued by an earlier run") }
        } else {
            try await DemoLedger.create(workload, in: store)
        }
        if enqueued < workload.total {
            let clock = ContinuousClock()
            let start = clock.now
            let batch = 1_000
            for from in stride(from: enqueued, to: workload.total, by: batch) {
                try await DemoLedger.enqueue(workload, from: from, to: min(from + batch, workload.total), in: store)
            }
            say("enqueued \(grouped(workload.total - enqueued)) uploads over \(workload.users) user queues in \(String(format: "%.2f", (clock.now - start).seconds)) s (seed \(workload.seed))")
        }
        try await DemoLedger.add(1, to: "runs", in: store)
        let settings = work.settings(maxAttempts: workload.maxAttempts)
        let report = try await Runner.run(store: store, settings: settings, concurrency: work.concurrency, title: "demo")
        try await Summary.show(for: store, report: report, settings: settings)
        if report.interrupted {
            throw ExitCode(130)
        }
    }
}

/// The demo's closing table.
enum Summary {
    static func show(for store: Store, report: RunReport, settings: HandlerSettings) async throws {
        guard let ledger = try await DemoLedger.load(from: store) else { return }
        var queued = 0
        var dead = 0
        var deadQueues: [(String, Int)] = []
        for queue in try await store.queues() {
            let demoTasks = try await store.tasks(in: queue.name).filter { $0.key.hasPrefix(Workload.keyPrefix) }.count
            if QueueNames.isLive(queue.name) {
                queued += demoTasks
            } else if queue.isDeadLetter, demoTasks > 0 {
                dead += demoTasks
                deadQueues.append((queue.name, demoTasks))
            }
        }
        let uploaded = max(0, ledger.enqueued - queued - dead - ledger.purged)
        let c = report.counts
        let rule = String(repeating: "-", count: 64)
        var rows: [(String, String)] = [
            ("database", store.path),
            ("workload", "\(grouped(ledger.workload.total)) uploads over \(ledger.workload.users) user queues (seed \(ledger.workload.seed))"),
            ("uploaded", grouped(uploaded)),
            ("dead-lettered", "\(grouped(dead)) (failed \(settings.maxAttempts) attempts; `queuekit list --dead-letter`)"),
            ("still queued", grouped(queued)),
        ]
        if ledger.purged > 0 { rows.append(("purged", grouped(ledger.purged))) }
        if !deadQueues.isEmpty {
            let top = deadQueues.sorted { $0.1 > $1.1 }.prefix(4).map { "\($0.0) (\($0.1))" }.joined(separator: ", ")
            rows.append(("dead letters in", top + (deadQueues.count > 4 ? ", …" : "")))
        }
        rows.append(("this run", "\(grouped(c.handled)) handled in \(String(format: "%.1f", report.elapsed.seconds)) s (\(grouped(Int(report.rate)))/s), run #\(ledger.runs)"))
        rows.append(("", "\(grouped(c.uploaded)) uploaded (\(grouped(c.uploadedAfterRetry)) after a retry), \(grouped(c.deadLettered)) dead-lettered, \(grouped(c.retries)) retries"))
        rows.append(("status", report.interrupted
            ? "interrupted: run `make demo` (or `queuekit demo`) again to resume"
            : queued > 0 ? "\(grouped(queued)) still queued: run again to continue"
            : c.handled == 0 ? "complete (already, before this run; --fresh starts a new workload)" : "complete"))
        say("")
        say("queuekit demo: summary")
        say(rule)
        for (label, value) in rows {
            say("  " + label.padding(toLength: 18, withPad: " ", startingAt: 0) + value)
        }
        say(rule)
    }
}
