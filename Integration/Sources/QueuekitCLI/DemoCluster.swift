import ArgumentParser
import Foundation
#if Postgres
import TaskBrokerPostgres
#endif

/// `queuekit demo-cluster`: the demo's workload on PostgreSQL, run by several `queuekit work`
/// processes; one is SIGKILLed halfway, and the summary shows the others taking its queues over.
struct DemoCluster: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-cluster",
        abstract: "Run the demo's workload on PostgreSQL with several worker processes, SIGKILL one halfway, and show the takeover.",
        discussion: """
            Starts --workers `queuekit work` processes on the --database (a postgres:// URL), \
            kills one with SIGKILL once --kill-at of the uploads are done, and checks from the \
            workers' traces that no two uploads of one user ran at once, none started out of \
            order, and the only re-runs are of uploads the killed worker was running. Always \
            starts a new workload (every stored upload is deleted first).
            """
    )

    @OptionGroup var options: DatabaseOptions

    @OptionGroup var workloadOptions: WorkloadOptions

    @Option(help: "How many worker processes.")
    var workers = 3

    @Option(help: "Kill one worker once this share of the uploads is done (0 to 1).")
    var killAt = 0.5

    @OptionGroup var work: WorkOptions

    func validate() throws {
        guard workloadOptions.actions >= 1, workers >= 2 else {
            throw ValidationError("--actions must be at least 1, and --workers at least 2.")
        }
        guard (0...1).contains(killAt) else { throw ValidationError("--kill-at is a share between 0 and 1.") }
    }

    func run() async throws {
        let location = try options.location()
        guard location.isShared else {
            throw QueuekitError(
                "demo-cluster needs a database that several processes share: --database postgres://USER@HOST/DATABASE.",
                exitCode: 64
            )
        }
        let store = try await options.open(create: true)
        try await Demo.erase(store)
        let workload = try await Demo.enqueue(workloadOptions.workload(maxAttempts: work.maxAttempts), in: store)
        try await DemoLedger.add(1, to: .runs, in: store)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("queuekit-cluster-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        let clock = ContinuousClock()
        let start = clock.now
        let pool = try WorkerPool(count: workers, folder: folder, arguments: work.workerArguments(database: options.database))
        do {
            try await drive(pool, store: store, workload: workload, clock: clock, start: start)
        } catch {
            // The workers would go on without anyone to report to (and, once the throwaway
            // cluster is gone, retry their connection forever).
            await pool.stopAll()
            throw error
        }
    }

    private func drive(
        _ pool: WorkerPool, store: Store, workload: Workload, clock: ContinuousClock, start: ContinuousClock.Instant
    ) async throws {
        say("started \(workers) workers (pids \(pool.pids.map(String.init).joined(separator: ", "))); one is killed at \(Int(killAt * 100))%")
        let printer = ProgressPrinter(title: "cluster")
        var kill: (worker: Int, time: UInt64, done: Int)?
        while pool.isRunning {
            let queues = try await store.queues()
            let left = queues.filter { QueueNames.isLive($0.name) }.reduce(0) { $0 + $1.pending }
            let dead = queues.reduce(0) { $0 + $1.deadLetters }
            let done = workload.total - left
            printer.show(
                RunProgress.Counts(target: workload.total, uploaded: done - dead, deadLettered: dead),
                elapsed: clock.now - start
            )
            if kill == nil, Double(done) >= killAt * Double(workload.total) {
                let victim = workers / 2
                let time = await pool.sigkill(victim)
                kill = (victim, time, done)
                printer.finishLine()
                printer.note("killed worker \(victim + 1) (pid \(pool.pids[victim])) with SIGKILL at \(grouped(done)) of \(grouped(workload.total)) uploads")
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        printer.finishLine()
        let elapsed = clock.now - start
        for failure in pool.failures() {
            printer.note("worker \(failure.worker + 1) failed (\(failure.reason)); its output: \(failure.log)")
        }
        let trace = ClusterTrace(texts: pool.traces())
        let rows = report(trace: trace, kill: kill, pool: pool, deadLettered: try await store.deadLetterKeys())
        let outcomes = trace.outcomes()
        let report = RunReport(
            counts: RunProgress.Counts(
                target: workload.total, uploaded: outcomes.uploaded, uploadedAfterRetry: outcomes.uploadedAfterRetry,
                deadLettered: outcomes.deadLettered, retries: outcomes.retries
            ),
            elapsed: elapsed, interrupted: false
        )
        try await Summary.show(for: store, report: report, settings: work.settings(maxAttempts: workload.maxAttempts), extraRows: rows.table)
        guard rows.passed, pool.failures().isEmpty else {
            throw QueuekitError("the cluster run broke a promise (see the checks above).")
        }
    }

    /// The summary's cluster rows, and whether every check passed.
    private func report(
        trace: ClusterTrace, kill: (worker: Int, time: UInt64, done: Int)?, pool: WorkerPool, deadLettered: Set<String>
    ) -> (table: [(String, String)], passed: Bool) {
        var rows: [(String, String)] = []
        let handled = (0..<workers).map { worker in
            "\(worker + 1): \(grouped(trace.handled(by: worker)))\(worker == kill?.worker ? " (killed)" : "")"
        }
        rows.append(("workers", "\(workers) processes; uploads handled by each: " + handled.joined(separator: ", ")))
        guard let kill else {
            rows.append(("killed", "none: the workload ended before \(Int(killAt * 100))% was seen; use more --actions"))
            return (rows, false)
        }
        let takeovers = trace.takeovers(killed: kill.worker, at: kill.time)
        let reRuns = trace.reRuns(kills: [kill.worker: kill.time])
        let overlaps = trace.overlaps(kills: [kill.worker: kill.time])
        let outOfOrder = trace.outOfOrder(deadLettered: deadLettered)
        let lease = leaseDescription()
        rows.append(("killed", "worker \(kill.worker + 1) (pid \(pool.pids[kill.worker])), SIGKILL at \(grouped(kill.done)) uploads done"))
        if takeovers.isEmpty {
            rows.append(("takeover", "the killed worker held no queue with work left"))
        } else {
            let seconds = takeovers.map(\.seconds)
            rows.append((
                "takeover",
                "\(takeovers.count) queue(s) resumed on other workers after \(format(seconds[seconds.count / 2])) s (median), "
                    + "\(format(seconds.last ?? 0)) s (max); lease \(lease)"
            ))
        }
        rows.append(("re-runs", "\(reRuns.total) (at-least-once: uploads the killed worker was running)"
            + (reRuns.unexplained.isEmpty ? "" : "; \(reRuns.unexplained.count) NOT explained by the kill")))
        rows.append(("checks", "\(overlaps.count) overlapping runs in a queue, \(outOfOrder.count) out of order, \(reRuns.unexplained.count) unexplained re-runs"))
        for problem in (overlaps + outOfOrder + reRuns.unexplained).prefix(5) {
            rows.append(("", problem))
        }
        return (rows, overlaps.isEmpty && outOfOrder.isEmpty && reRuns.unexplained.isEmpty)
    }

    private func leaseDescription() -> String {
        #if Postgres
        guard case .postgres(let configuration, _) = try? options.location() else { return "?" }
        return "\(format(configuration.leaseDuration.seconds)) s"
        #else
        return "?"
        #endif
    }

    private func format(_ seconds: Double) -> String {
        String(format: "%.2f", seconds)
    }
}

/// The `queuekit work` processes of a cluster run, each writing its trace and output to a file.
final class WorkerPool: Sendable {
    let pids: [Int32]
    private let processes: [Process]
    private let traceFiles: [URL]
    private let logFiles: [URL]

    /// Starts `count` copies of this executable with `arguments` plus a trace file each.
    init(count: Int, folder: URL, arguments: [String]) throws {
        var processes: [Process] = []
        var traceFiles: [URL] = []
        var logFiles: [URL] = []
        for worker in 0..<count {
            let process: WorkerProcess
            do {
                process = try WorkerProcess.launch(arguments: arguments, folder: folder, name: "worker-\(worker + 1)")
            } catch {
                for started in processes { kill(started.processIdentifier, SIGKILL) }
                throw error
            }
            processes.append(process.process)
            traceFiles.append(process.trace)
            logFiles.append(process.log)
        }
        self.processes = processes
        self.traceFiles = traceFiles
        self.logFiles = logFiles
        pids = processes.map(\.processIdentifier)
    }

    /// Whether any worker still runs.
    var isRunning: Bool { processes.contains(where: \.isRunning) }

    /// Kills a worker with SIGKILL (no clean-up: its leases simply stop being renewed) and waits
    /// until it is gone.
    /// - Returns: The time it was seen dead (`TraceLog.now()`). Not the time of `kill`: the signal
    ///   lands a moment later, and a run the worker began in that moment was still cut short by it.
    func sigkill(_ worker: Int) async -> UInt64 {
        kill(pids[worker], SIGKILL)
        await WorkerProcess.waitForExit(processes[worker])
        return TraceLog.now()
    }

    /// Kills every worker still running and waits until they are gone (the run gave up).
    func stopAll() async {
        for process in processes where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
        for process in processes {
            await WorkerProcess.waitForExit(process)
        }
    }

    /// Workers that ended other than by a clean exit or the SIGKILL of `sigkill(_:)`.
    func failures() -> [(worker: Int, reason: String, log: String)] {
        processes.enumerated().compactMap { worker, process in
            guard !process.isRunning else { return nil }
            if process.terminationReason == .uncaughtSignal, process.terminationStatus == SIGKILL { return nil }
            guard process.terminationStatus != 0 else { return nil }
            return (worker, "exit status \(process.terminationStatus)", WorkerProcess.lastLines(of: logFiles[worker]))
        }
    }

    /// The text of each worker's trace file.
    func traces() -> [String] {
        traceFiles.map(WorkerProcess.text(of:))
    }
}

/// One `queuekit work` process started by this one, writing its trace and its output to files.
struct WorkerProcess: Sendable {
    var process: Process
    var trace: URL
    var log: URL

    /// Starts this executable with `arguments` plus `--trace-file FOLDER/NAME.trace`, its output
    /// going to `FOLDER/NAME.log`.
    static func launch(arguments: [String], folder: URL, name: String) throws -> WorkerProcess {
        guard let executable = Bundle.main.executableURL else {
            throw QueuekitError("cannot find the queuekit executable to start workers.")
        }
        let trace = folder.appendingPathComponent("\(name).trace")
        let log = folder.appendingPathComponent("\(name).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let output = try FileHandle(forWritingTo: log)
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments + ["--trace-file", trace.path]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        // The child has its own copy of the descriptor; this process's copy would leak one
        // descriptor per worker started (the soak starts hundreds).
        defer { try? output.close() }
        try process.run()
        return WorkerProcess(process: process, trace: trace, log: log)
    }

    /// Returns once `process` has exited.
    static func waitForExit(_ process: Process) async {
        while process.isRunning {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// A file's text; empty when it cannot be read.
    static func text(of file: URL) -> String {
        (try? String(contentsOf: file, encoding: .utf8)) ?? ""
    }

    /// The last three lines of a log, joined by " / ".
    static func lastLines(of log: URL) -> String {
        text(of: log).split(separator: "\n").suffix(3).joined(separator: " / ")
    }
}
