import ArgumentParser
import Foundation
import TaskBroker

/// `queuekit demo`: enqueue a realistic workload and run it to the end, resumably.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Enqueue 10,000 simulated uploads over 50 user queues and run them, with retries and dead letters.",
        discussion: """
            Run it again after Ctrl-C (or a crash) and it resumes: nothing already done is \
            enqueued again, and stored retries keep their attempt counts. --fresh starts over. \
            A new workload also saves one upload to start 2 s later, pauses one user's \
            queue for the first second, as an operator would, and runs a schedule (`digest`, \
            every second) for two ticks.
            """
    )

    @OptionGroup var options: DatabaseOptions

    @OptionGroup var workloadOptions: WorkloadOptions

    @OptionGroup var work: WorkOptions

    @Flag(help: "Delete the database file (on PostgreSQL: every stored upload) first and start a new workload.")
    var fresh = false

    func run() async throws {
        let location = try options.location()
        if fresh, case .sqlite(let path) = location {
            for suffix in ["", "-wal", "-shm"] {
                try? FileManager.default.removeItem(atPath: path + suffix)
            }
        }
        let store = try await options.open(create: true)
        if fresh, location.isShared {
            try await Demo.erase(store)
        }
        let requested = workloadOptions.workload(maxAttempts: work.maxAttempts)
        let isNew = try await DemoLedger.load(from: store).map { $0.enqueued == 0 } ?? true
        let workload = try await Demo.enqueue(requested, in: store)
        try await DemoLedger.add(1, to: .runs, in: store)
        let settings = work.settings(maxAttempts: workload.maxAttempts)
        let showcase: Showcase? = if isNew { try await Showcase.begin(in: store, workload: workload) } else { nil }
        async let resumed: Void? = showcase?.resumeAfterPause(in: store)
        let schedule: ShowcaseSchedule? = showcase.map { ShowcaseSchedule(start: $0.start) }
        var alongside: (@Sendable () async -> Void)?
        if let schedule {
            alongside = { await schedule.run(in: store) }
        }
        let report: RunReport
        do {
            report = try await Runner.run(
                store: store, settings: settings, concurrency: work.concurrency, title: "demo",
                pausedForAWhile: Set(showcase.map { [$0.pausedQueue] } ?? []),
                alongside: alongside
            )
        } catch {
            _ = try? await resumed
            throw error
        }
        _ = try await resumed
        var extraRows = showcase?.rows(for: report.counts) ?? []
        if let schedule { extraRows.append(schedule.row(for: report.counts)) }
        try await Summary.show(for: store, report: report, settings: settings, extraRows: extraRows)
        if report.interrupted {
            throw ExitCode(130)
        }
        if let stuck = report.stuckError { throw stuck }
    }
}

extension Demo {
    /// Enqueues what `workload` has not stored yet, in batches that each record their progress in
    /// the ledger; a database that already holds a demo resumes that one.
    /// - Returns: The workload in the database.
    static func enqueue(_ requested: Workload, in store: Store) async throws -> Workload {
        var workload = requested
        var enqueued = 0
        if let ledger = try await DemoLedger.load(from: store) {
            if ledger.workload != workload {
                say("note: \(store.name) holds the workload of seed \(ledger.workload.seed) (\(grouped(ledger.workload.total)) uploads); resuming it (--fresh starts over).")
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
        return workload
    }

    /// Deletes every stored upload and the demo's ledger, for `--fresh` on a database that is not
    /// a file of its own.
    static func erase(_ store: Store) async throws {
        for queue in try await store.queues() {
            _ = try await store.run("purge \(queue.name)") { try await store.database.purge(queueName: queue.name) }
        }
        try await store.run("delete the demo's ledger") { try await store.backend.deleteLedger() }
    }
}

/// The demo's closing table.
enum Summary {
    /// Prints the table; `extraRows` come before the status row.
    static func show(
        for store: Store, report: RunReport, settings: HandlerSettings, extraRows: [(String, String)] = []
    ) async throws {
        guard let ledger = try await DemoLedger.load(from: store) else { return }
        // Every live upload (the workload's and the showcase's), and the workload's alone.
        var queued = 0
        var workloadQueued = 0
        for queue in try await store.queues() where queue.pending > 0 && QueueNames.isLive(queue.name) {
            queued += queue.pending
            workloadQueued += try await store.tasks(in: queue.name).filter { $0.key.hasPrefix(Workload.keyPrefix) }.count
        }
        let deadLetters = try await store.deadLetters().filter { $0.key.hasPrefix(Workload.keyPrefix) }
        let dead = deadLetters.count
        let deadQueues = Dictionary(grouping: deadLetters, by: \.queueName).map { ($0.key, $0.value.count) }
        let uploaded = max(0, ledger.enqueued - workloadQueued - dead - ledger.purged)
        let c = report.counts
        let rule = String(repeating: "-", count: 64)
        var rows: [(String, String)] = [
            ("database", store.name),
            ("workload", "\(grouped(ledger.workload.total)) uploads over \(ledger.workload.users) user queues (seed \(ledger.workload.seed))"),
            ("uploaded", grouped(uploaded)),
            ("dead-lettered", "\(grouped(dead)) (failed \(settings.maxAttempts) attempts; `queuekit list --dead-letter`)"),
            ("still queued", grouped(queued)),
        ]
        if ledger.purged > 0 { rows.append(("purged", grouped(ledger.purged))) }
        if !deadQueues.isEmpty {
            let top = deadQueues.sorted { ($0.1, $1.0) > ($1.1, $0.0) }.prefix(4).map { "\($0.0) (\($0.1))" }.joined(separator: ", ")
            rows.append(("dead letters in", top + (deadQueues.count > 4 ? ", …" : "")))
        }
        rows.append(("this run", "\(grouped(c.handled)) handled in \(String(format: "%.1f", report.elapsed.seconds)) s (\(grouped(Int(report.rate)))/s), run #\(ledger.runs)"))
        rows.append(("", "\(grouped(c.uploaded)) uploaded (\(grouped(c.uploadedAfterRetry)) after a retry), \(grouped(c.deadLettered)) dead-lettered, \(grouped(c.retries)) retries"))
        rows += extraRows
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
