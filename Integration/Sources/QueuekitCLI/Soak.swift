import ArgumentParser
import Foundation
import Synchronization
import TaskBroker

/// `queuekit soak`: the demo's workload, kept flowing for a while, with worker processes killed
/// at random; then checks that every upload was done once and in order, and that the workers'
/// memory and file descriptors did not grow.
struct Soak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the demo's workload for --duration seconds with random SIGKILLs of the workers, and check nothing was lost, repeated, reordered or leaked.",
        discussion: """
            Starts --workers `queuekit work --watch` processes and keeps about --backlog \
            uploads queued for them. During the first third it SIGKILLs a random worker every \
            --kill-min to --kill-max seconds and starts it again. During the rest no worker \
            is killed, and each one's resident memory and open file descriptors are sampled \
            (Linux /proc) and a line is fitted through them. Then it stops enqueuing, waits until \
            every upload is done, stops the workers with SIGTERM, and checks: every acknowledged \
            upload was uploaded or dead-lettered, exactly once; the only re-runs were of uploads a \
            killed worker was running; no queue ran two uploads at once or one before its \
            predecessor was done; neither slope is above its limit. Needs an empty database.
            """
    )

    @OptionGroup var options: DatabaseOptions

    @Option(help: "Seconds to run (a third with kills, the rest without).")
    var duration = 60.0

    @Option(help: "Worker processes (default: 1 on SQLite, which runs one worker per file; 3 on PostgreSQL).")
    var workers: Int?

    @Option(help: "Uploads kept queued for the workers.")
    var backlog = 2_000

    @Option(help: "Shortest time between two kills, in seconds.")
    var killMin = 0.5

    @Option(help: "Longest time between two kills, in seconds.")
    var killMax = 3.0

    @Option(help: "Fail when a process's resident memory grows faster than this, in MB per minute (fitted).")
    var maxRssGrowth = 10.0

    @Option(help: "Fail when a process's open file descriptors grow faster than this, per minute (fitted).")
    var maxFdGrowth = 2.0

    @Option(help: ArgumentHelp("Write every memory sample to FILE (CSV: process, seconds, RSS in MB, open fds).", valueName: "FILE"))
    var samplesFile: String?

    @Option(help: "How many users (one serial queue each).")
    var users = 50

    @Option(help: "Seed of the workload: the same seed gives the same uploads and failures.")
    var seed: UInt64 = 42

    @OptionGroup var work: WorkOptions

    /// The most uploads one soak enqueues (its keys sort in enqueue order up to here).
    static let maximumUploads = 999_999_999

    /// Upload `index` of the soak: the demo workload's, with a key of its own that sorts in
    /// enqueue order.
    static func upload(_ index: Int, of workload: Workload) -> UploadAction {
        var action = workload.action(at: index)
        action.key = key(index)
        return action
    }

    /// The key of upload `index`.
    static func key(_ index: Int) -> String {
        "soak-\(pad(index, 9))"
    }

    func validate() throws {
        guard duration > 0, duration <= 86_400 else { throw ValidationError("--duration takes 1 to 86400 seconds.") }
        guard backlog >= 1, users >= 1, (workers ?? 1) >= 1 else {
            throw ValidationError("--backlog, --users and --workers must be at least 1.")
        }
        guard killMin > 0, killMax >= killMin, killMax <= 3_600 else {
            throw ValidationError("--kill-min must be above 0 and at most --kill-max (at most 3600).")
        }
        guard maxRssGrowth >= 0, maxFdGrowth >= 0 else { throw ValidationError("growth limits cannot be negative.") }
    }

    func run() async throws {
        let location = try options.location()
        let workerCount = workers ?? (location.isShared ? 3 : 1)
        guard location.isShared || workerCount == 1 else {
            throw QueuekitError("an SQLite file runs one worker process; --workers above 1 needs --database postgres://…", exitCode: 64)
        }
        let store = try await options.open(create: true)
        guard try await store.queues().isEmpty else {
            throw QueuekitError("soak needs an empty database, and \(store.name) holds uploads; pass another --database (or `queuekit purge --all`).")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("queuekit-soak-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let workload = Workload(
            seed: seed, total: Self.maximumUploads, users: users, transientRate: 0.08, permanentRate: 0.002,
            maxAttempts: work.maxAttempts
        )
        let processes = try SoakProcesses(
            count: workerCount, folder: folder, arguments: work.workerArguments(database: options.database) + ["--watch"]
        )
        say("soak: \(workerCount) worker(s) on \(store.name) for \(Int(duration)) s; kills in the first third, memory sampled after it; files in \(folder.path)")
        let run = try await drive(processes, store: store, workload: workload)
        if let samplesFile { try Self.write(run, to: samplesFile) }
        let verdict = try await check(run, processes: processes, store: store, workload: workload)
        for (label, value) in verdict.rows {
            say("  " + label.padding(toLength: 16, withPad: " ", startingAt: 0) + value)
        }
        guard verdict.passed else {
            throw QueuekitError("the soak broke a promise (see the checks above); traces and logs are in \(folder.path).")
        }
        try? FileManager.default.removeItem(at: folder)
        say("soak: passed")
    }

    /// Writes the memory samples as CSV.
    private static func write(_ run: Run, to path: String) throws(QueuekitError) {
        var lines = ["process,seconds,rss_mb,fds"]
        for (name, samples) in zip((1...run.samples.count).map { "worker \($0)" } + ["soak"], run.samples + [run.ownSamples]) {
            lines += samples.map { String(format: "%@,%.2f,%.2f,%d", name, $0.time, $0.rssMB, $0.fds) }
        }
        guard FileManager.default.createFile(atPath: path, contents: Data((lines.joined(separator: "\n") + "\n").utf8)) else {
            throw QueuekitError("cannot write the samples file \(path).")
        }
    }

    /// When the kills stop: after the first third of the run.
    static func killsEnd(of duration: Double) -> Double {
        duration / 3
    }

    /// What the run did, for the checks.
    struct Run: Sendable {
        var enqueued = 0
        var kills = 0
        var elapsed: Duration = .zero
        /// The samples of each worker slot's last process, and of this process.
        var samples: [[ResourceSample]] = []
        /// When each slot's last process started, in seconds since the soak began.
        var lastStart: [Double] = []
        var ownSamples: [ResourceSample] = []
        var drained = true
        /// Workers that did not stop cleanly on SIGTERM.
        var stopProblems: [String] = []
    }

    /// Keeps the backlog full, kills workers in the first third, samples after it, then drains.
    private func drive(_ processes: SoakProcesses, store: Store, workload: Workload) async throws -> Run {
        var run = Run()
        run.samples = Array(repeating: [], count: processes.count)
        run.lastStart = Array(repeating: 0, count: processes.count)
        let clock = ContinuousClock()
        let start = clock.now
        let end = start + .seconds(duration)
        let killsEnd = start + .seconds(Self.killsEnd(of: duration))
        var nextKill = start + .seconds(Double.random(in: killMin...killMax))
        var nextRefill = start
        var nextSample = killsEnd
        let printer = ProgressPrinter(title: "soak")
        var lastPrint = start
        while clock.now < end {
            let now = clock.now
            if now >= nextRefill {
                let pending = try await livePending(store)
                let count = min(backlog - pending, 1_000, Self.maximumUploads - run.enqueued)
                if count > 0 {
                    let actions = (run.enqueued..<run.enqueued + count).map { Self.upload($0, of: workload) }
                    try await store.run("enqueue uploads") { try await store.database.save(actions) }
                    run.enqueued += count
                }
                nextRefill = now + .milliseconds(250)
            }
            if now < killsEnd, now >= nextKill {
                let slot = Int.random(in: 0..<processes.count)
                await processes.killAndRestart(slot)
                run.kills += 1
                run.lastStart[slot] = (clock.now - start).seconds
                nextKill = clock.now + .seconds(Double.random(in: killMin...killMax))
            }
            if now >= nextSample {
                let seconds = (now - start).seconds
                for slot in 0..<processes.count {
                    if let sample = ResourceSample.read(pid: processes.currentPID(slot), at: seconds) {
                        run.samples[slot].append(sample)
                    }
                }
                if let own = ResourceSample.read(pid: getpid(), at: seconds) { run.ownSamples.append(own) }
                nextSample = now + .milliseconds(250)
            }
            if let failure = processes.unexpectedExit() {
                throw QueuekitError("a worker stopped by itself (\(failure)); traces and logs are in \(processes.folder.path).")
            }
            if now - lastPrint >= printer.interval {
                printer.note(String(format: "soak %5.1f s | enqueued %@ | kills %d", (now - start).seconds, grouped(run.enqueued), run.kills))
                lastPrint = now
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        // Let the workers finish what is stored (timed retries included), then stop them cleanly.
        let drainEnd = clock.now + .seconds(120)
        while try await livePending(store) > 0 {
            guard clock.now < drainEnd else {
                run.drained = false
                break
            }
            if let failure = processes.unexpectedExit() {
                throw QueuekitError("a worker stopped by itself (\(failure)); traces and logs are in \(processes.folder.path).")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        run.elapsed = clock.now - start
        run.stopProblems = await processes.terminateAll()
        return run
    }

    /// Uploads stored in live queues (in flight and waiting to be retried included).
    private func livePending(_ store: Store) async throws -> Int {
        try await store.queues().filter { QueueNames.isLive($0.name) }.reduce(0) { $0 + $1.pending }
    }

    /// The summary's rows, and whether every check passed.
    private func check(
        _ run: Run, processes: SoakProcesses, store: Store, workload: Workload
    ) async throws -> (rows: [(String, String)], passed: Bool) {
        let trace = ClusterTrace(texts: processes.traces())
        let kills = processes.killTimes()
        let deadLettered = try await store.deadLetterKeys()
        let outcome = SoakOutcome(
            acknowledged: Set((0..<run.enqueued).map(Self.key)),
            uploaded: Set(trace.lines.filter { !$0.isStart && $0.outcome == "uploaded" }.map(\.key)),
            deadLettered: deadLettered,
            stillQueued: try await livePending(store)
        )
        let reRuns = trace.reRuns(kills: kills)
        let overlaps = trace.overlaps(kills: kills)
        let outOfOrder = trace.outOfOrder(deadLettered: deadLettered)
        // Memory is fitted from 10 s after the kills stop, and at least 15 s after a worker's last
        // start (a new process takes ~10 s to reach its working size; at most a sixth of the run).
        let quiet = Self.killsEnd(of: duration) + min(10, duration / 6)
        let growth = (0..<processes.count).map { ResourceGrowth(run.samples[$0], from: max(quiet, run.lastStart[$0] + min(15, duration / 4))) }
            + [ResourceGrowth(run.ownSamples, from: quiet)]
        let names = (0..<processes.count).map { "worker \($0 + 1)" } + ["soak process"]
        var rows: [(String, String)] = [
            ("ran", String(format: "%.1f s (%.0f s of kills), %d worker(s), %d SIGKILLs survived", run.elapsed.seconds, Self.killsEnd(of: duration), processes.count, run.kills)),
            ("uploads", "\(grouped(run.enqueued)) acknowledged: \(grouped(outcome.uploaded.count)) uploaded, \(grouped(outcome.deadLettered.count)) dead-lettered, \(grouped(outcome.stillQueued)) still queued"),
            ("re-runs", "\(reRuns.total) (at-least-once: uploads a killed worker was running), \(reRuns.unexplained.count) not explained by a kill"),
            ("checks", "\(outcome.lost.count) lost, \(outcome.duplicated.count) done twice, \(outcome.phantom.count) never enqueued, \(outOfOrder.count) out of order, \(overlaps.count) overlapping"),
        ]
        var passed = run.drained && run.stopProblems.isEmpty && outcome.isClean && reRuns.unexplained.isEmpty && overlaps.isEmpty && outOfOrder.isEmpty
        if !run.drained { rows.append(("drain", "the workers did not finish the stored uploads within 120 s")) }
        for problem in (outcome.problems + run.stopProblems + reRuns.unexplained + overlaps + outOfOrder).prefix(5) {
            rows.append(("", problem))
        }
        for (name, growth) in zip(names, growth) {
            guard let growth else {
                rows.append((name, "memory not sampled (needs Linux /proc and \(Int(duration - Self.killsEnd(of: duration))) s without kills)"))
                passed = passed && ResourceSample.read(pid: getpid(), at: 0) == nil
                continue
            }
            let rssOK = growth.rssMBPerMinute <= maxRssGrowth
            let fdOK = growth.fdsPerMinute <= maxFdGrowth
            passed = passed && rssOK && fdOK
            rows.append((name, String(
                format: "RSS %.1f → %.1f MB (%+.2f MB/min%@), fds %d → %d (%+.2f/min%@), %d samples",
                growth.first.rssMB, growth.last.rssMB, growth.rssMBPerMinute, rssOK ? "" : " ABOVE THE LIMIT",
                growth.first.fds, growth.last.fds, growth.fdsPerMinute, fdOK ? "" : " ABOVE THE LIMIT", growth.count
            )))
        }
        return (rows, passed)
    }
}

/// What became of the acknowledged uploads.
struct SoakOutcome: Sendable {
    var acknowledged: Set<String>
    var uploaded: Set<String>
    var deadLettered: Set<String>
    var stillQueued: Int

    /// Acknowledged, and neither uploaded nor dead-lettered.
    var lost: Set<String> { acknowledged.subtracting(uploaded).subtracting(deadLettered) }
    /// Both uploaded and dead-lettered.
    var duplicated: Set<String> { uploaded.intersection(deadLettered) }
    /// Done, but never enqueued.
    var phantom: Set<String> { uploaded.union(deadLettered).subtracting(acknowledged) }

    var isClean: Bool { lost.isEmpty && duplicated.isEmpty && phantom.isEmpty && stillQueued == 0 }

    /// One line per broken promise, a few keys each.
    var problems: [String] {
        [("lost", lost), ("both uploaded and dead-lettered", duplicated), ("done but never enqueued", phantom)]
            .filter { !$0.1.isEmpty }
            .map { "\($0.1.count) \($0.0): \($0.1.sorted().prefix(3).joined(separator: ", "))" }
    }
}

/// A process's resident memory and open file descriptors at one moment.
struct ResourceSample: Sendable, Equatable {
    /// Seconds since the soak started.
    var time: Double
    var rssBytes: Int
    var fds: Int

    var rssMB: Double { Double(rssBytes) / 1_048_576 }

    /// Reads `/proc/PID/statm` and `/proc/PID/fd`; `nil` where there is no `/proc` or no such process.
    static func read(pid: Int32, at time: Double) -> ResourceSample? {
        guard let statm = try? String(contentsOfFile: "/proc/\(pid)/statm", encoding: .utf8),
              let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) }),
              let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        else { return nil }
        return ResourceSample(time: time, rssBytes: pages * Int(sysconf(Int32(_SC_PAGESIZE))), fds: fds.count)
    }
}

/// Least-squares slopes of memory and descriptors over the samples from `from` seconds on.
struct ResourceGrowth: Sendable {
    var first: ResourceSample
    var last: ResourceSample
    var count: Int
    var rssMBPerMinute: Double
    var fdsPerMinute: Double

    /// `nil` with fewer than 8 samples in the window.
    init?(_ samples: [ResourceSample], from: Double) {
        let window = samples.filter { $0.time >= from }
        guard window.count >= 8, let first = window.first, let last = window.last else { return nil }
        self.first = first
        self.last = last
        count = window.count
        rssMBPerMinute = Self.slope(window.map { ($0.time, $0.rssMB) }) * 60
        fdsPerMinute = Self.slope(window.map { ($0.time, Double($0.fds)) }) * 60
    }

    /// The slope of the least-squares line through `points`.
    static func slope(_ points: [(x: Double, y: Double)]) -> Double {
        let n = Double(points.count)
        let meanX = points.reduce(0) { $0 + $1.x } / n
        let meanY = points.reduce(0) { $0 + $1.y } / n
        let covariance = points.reduce(0) { $0 + ($1.x - meanX) * ($1.y - meanY) }
        let variance = points.reduce(0) { $0 + ($1.x - meanX) * ($1.x - meanX) }
        return variance > 0 ? covariance / variance : 0
    }
}

/// The soak's worker processes: a fixed number of slots, each running one `queuekit work --watch`
/// process at a time. A killed worker is started again in its slot as a new process with its own
/// trace file, so each trace (and each index of `traces()`) is one process's life.
final class SoakProcesses: Sendable {
    let count: Int
    let folder: URL
    private let arguments: [String]

    private struct State {
        /// Every process started, in order.
        var lives: [WorkerProcess] = []
        /// The kill time (`TraceLog.now()`) of each life that was killed.
        var kills: [Int: UInt64] = [:]
        /// The life each slot runs now.
        var current: [Int] = []
        /// Killed lives that could not be started again.
        var failedRestarts = Set<Int>()
    }

    private let state: Mutex<State>

    /// Starts `count` workers with `arguments`.
    init(count: Int, folder: URL, arguments: [String]) throws {
        self.count = count
        self.folder = folder
        self.arguments = arguments
        var state = State()
        for slot in 0..<count {
            state.lives.append(try WorkerProcess.launch(arguments: arguments, folder: folder, name: "life-\(slot + 1)"))
            state.current.append(slot)
        }
        self.state = Mutex(state)
    }

    /// The process id of the worker a slot runs now.
    func currentPID(_ slot: Int) -> Int32 {
        state.withLock { $0.lives[$0.current[slot]].process.processIdentifier }
    }

    /// SIGKILLs the worker of `slot`, waits until it is gone, and starts a new one in its place.
    func killAndRestart(_ slot: Int) async {
        let (life, process) = state.withLock { state in
            let life = state.current[slot]
            return (life, state.lives[life].process)
        }
        kill(process.processIdentifier, SIGKILL)
        await WorkerProcess.waitForExit(process)
        // The time it was seen dead, not the time of `kill`: the signal lands a moment later, and a
        // run the process began in that moment was still cut short by it.
        state.withLock { $0.kills[life] = TraceLog.now() }
        do {
            let next = try WorkerProcess.launch(arguments: arguments, folder: folder, name: "life-\(life + count + 1)")
            state.withLock { state in
                state.lives.append(next)
                state.current[slot] = state.lives.count - 1
            }
        } catch {
            // The slot stays on its dead process, which `unexpectedExit()` then reports.
            state.withLock { _ = $0.failedRestarts.insert(life) }
        }
    }

    /// A worker of a slot that ended without being killed here, described with its log's last lines.
    func unexpectedExit() -> String? {
        state.withLock { state in
            for life in state.current where state.failedRestarts.contains(life) {
                return "a killed worker could not be started again (life \(life + 1))"
            }
            for life in state.current where !state.lives[life].process.isRunning && state.kills[life] == nil {
                let process = state.lives[life].process
                return "pid \(process.processIdentifier), status \(process.terminationStatus): \(WorkerProcess.lastLines(of: state.lives[life].log))"
            }
            return nil
        }
    }

    /// Stops every worker with SIGTERM (a clean stop: running uploads finish) and waits for them.
    /// - Returns: The workers that did not exit with status 0.
    func terminateAll() async -> [String] {
        let processes = state.withLock { state in state.current.map { state.lives[$0] } }
        for worker in processes where worker.process.isRunning {
            kill(worker.process.processIdentifier, SIGTERM)
        }
        var problems: [String] = []
        for worker in processes {
            await WorkerProcess.waitForExit(worker.process)
            if worker.process.terminationReason != .exit || worker.process.terminationStatus != 0 {
                problems.append("pid \(worker.process.processIdentifier) ended with status \(worker.process.terminationStatus) on SIGTERM: \(WorkerProcess.lastLines(of: worker.log))")
            }
        }
        return problems
    }

    /// The trace text of every process, in the order they started.
    func traces() -> [String] {
        state.withLock { $0.lives.map { WorkerProcess.text(of: $0.trace) } }
    }

    /// Each killed process's index in `traces()`, with the time of its kill.
    func killTimes() -> [Int: UInt64] {
        state.withLock { $0.kills }
    }
}
