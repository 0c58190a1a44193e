import Dispatch
import Foundation
import Synchronization
import TaskBroker

/// How a run ended.
struct RunReport: Sendable {
    var counts: RunProgress.Counts
    var elapsed: Duration
    var interrupted: Bool
    /// Queues whose uploads wait for `queuekit retry` (paused until restarted) and held the run
    /// up: nothing else was left to do.
    var stuck: [String] = []
    /// Queues an operator paused (`queuekit pause`) that held the run up: nothing else was left.
    var pausedByOperator: [String] = []

    /// The error for a run that stopped because every upload left waits for `queuekit retry` or
    /// `queuekit resume`.
    var stuckError: QueuekitError? {
        if !stuck.isEmpty {
            let users = stuck.map(QueueNames.user(of:))
            return QueuekitError(
                "\(stuck.joined(separator: ", ")) \(stuck.count == 1 ? "is" : "are") paused until restarted (an upload that "
                    + "does not decode, or a pause from an earlier run): `queuekit list` shows \(stuck.count == 1 ? "it" : "them"), "
                    + "`queuekit retry \(users[0])` resumes \(stuck.count == 1 ? "it" : "one")."
            )
        }
        guard !pausedByOperator.isEmpty else { return nil }
        let users = pausedByOperator.map(QueueNames.user(of:))
        return QueuekitError(
            "what is left waits in \(pausedByOperator.joined(separator: ", ")), paused by an operator: "
                + "`queuekit resume \(users.joined(separator: " "))` runs \(users.count == 1 ? "it" : "them") again."
        )
    }

    var rate: Double {
        let seconds = elapsed.seconds
        return seconds > 0 ? Double(counts.handled) / seconds : 0
    }
}

/// Runs the upload broker over a store until no live action is left in it (this process or other
/// workers handled them), or until SIGINT/SIGTERM, printing progress as it goes. With `watch`,
/// it keeps running when the store is empty, taking what other processes enqueue, until
/// SIGINT/SIGTERM.
enum Runner {
    /// How often a worker looks at the store while it waits for its own actions: other workers
    /// of a shared database may handle the last of them.
    static let storeCheckInterval: Duration = .seconds(1)

    /// - Parameters:
    ///   - pausedForAWhile: Queues paused by an operator that the caller resumes soon: waiting for
    ///     them is not held up.
    ///   - alongside: Work that may save more uploads (the demo's schedule): runs beside the broker,
    ///     and the run is not done before it returns.
    static func run(
        store: Store, settings: HandlerSettings, concurrency: Int, title: String, trace: TraceLog? = nil,
        watch: Bool = false, pausedForAWhile: Set<String> = [], alongside: (@Sendable () async -> Void)? = nil
    ) async throws -> RunReport {
        // What is there to do: every live action stored now.
        let target = try await store.queues().filter { QueueNames.isLive($0.name) }.reduce(0) { $0 + $1.pending }
        let progress = RunProgress(target: target)
        guard target > 0 || watch else {
            return RunReport(counts: progress.counts, elapsed: .zero, interrupted: false)
        }
        let handler = UploadHandler(settings: settings, progress: progress, trace: trace)
        let signals = SignalWatcher()
        let clock = ContinuousClock()
        let start = clock.now
        let configuration = TaskQueueBroker.Configuration(maxConcurrentQueues: concurrency, shutdownTimeout: .seconds(10))
        let broker = try await store.run("start the broker") {
            try await TaskQueueBroker.setup(
                database: store.database, name: QueueNames.broker, handler: handler, configuration: configuration
            )
        }
        let printer = ProgressPrinter(title: title)
        /// How the wait ended: done, interrupted by a signal, or held up by queues paused until
        /// restarted or by an operator.
        enum Ending: Sendable { case done, interrupted, stuck([String]), pausedByOperator([String]) }
        let alongsideDone = DoneFlag(done: alongside == nil)
        let ending = await withTaskGroup(of: Ending.self) { group -> Ending in
            if let alongside {
                group.addTask {
                    await alongside()
                    alongsideDone.set()
                    progress.wake()
                    // Returning would end the run: the other tasks decide when it ends.
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(3600))
                    }
                    return .done
                }
            }
            group.addTask {
                // Watching: only a signal ends the run.
                while watch, !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(3600))
                }
                while !Task.isCancelled {
                    // This run's own actions first, then each outcome of the last ones; and the
                    // store every second meanwhile, since other workers may handle them.
                    await progress.wait(untilDone: progress.counts.remaining > 0)
                    // Done only once nothing live is stored: another process may have enqueued
                    // uploads meanwhile, and the broker runs those too.
                    // A read that fails (the database restarting, say) tells nothing: asked
                    // again at the next check, not taken for "nothing left" (that exited 0 with
                    // uploads still stored).
                    guard let queues = try? await broker.snapshot() else { continue }
                    let live = queues.filter { QueueNames.isLive($0.name) }
                    guard live.contains(where: { $0.pending > 0 }) else {
                        // The work alongside may still save uploads: looked at again at the next check.
                        if alongsideDone.isDone { return .done }
                        continue
                    }
                    // Nothing can go on without `queuekit retry` or `queuekit resume`: waiting would
                    // never end.
                    let waiting = live.filter { $0.pending > 0 }
                    let held = waiting.filter {
                        $0.inFlight == nil
                            && ($0.pause == .untilRestart || $0.pausedByOperator && !pausedForAWhile.contains($0.name))
                    }
                    if held.count == waiting.count {
                        let restart = held.filter { $0.pause == .untilRestart }
                        return restart.isEmpty ? .pausedByOperator(held.map(\.name)) : .stuck(restart.map(\.name))
                    }
                    let left = live.reduce(0) { $0 + max(0, $1.pending - ($1.inFlight == nil ? 0 : 1)) }
                    if left > progress.counts.remaining { progress.expect(more: left) }
                }
                return .done
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: storeCheckInterval)
                    progress.wake()
                }
                return .done
            }
            group.addTask {
                for await _ in signals.stream {
                    return .interrupted
                }
                return .done
            }
            group.addTask {
                while !Task.isCancelled {
                    printer.show(progress.counts, elapsed: clock.now - start)
                    do {
                        try await Task.sleep(for: printer.interval)
                    } catch {
                        break
                    }
                }
                return .done
            }
            let first = await group.next() ?? .done
            group.cancelAll()
            return first
        }
        let interrupted = if case .interrupted = ending { true } else { false }
        if interrupted {
            printer.finishLine()
            printer.note("interrupted: letting the running uploads finish (Ctrl-C again to quit at once)…")
        }
        await broker.shutdown()
        signals.stop()
        let elapsed = clock.now - start
        printer.show(progress.counts, elapsed: elapsed, force: true)
        printer.finishLine()
        var report = RunReport(counts: progress.counts, elapsed: elapsed, interrupted: interrupted)
        switch ending {
        case .stuck(let names): report.stuck = names
        case .pausedByOperator(let names): report.pausedByOperator = names
        case .done, .interrupted: break
        }
        return report
    }
}

/// Whether something is done, shared by tasks.
final class DoneFlag: Sendable {
    private let done: Atomic<Bool>

    init(done: Bool) {
        self.done = Atomic(done)
    }

    var isDone: Bool { done.load(ordering: .acquiring) }

    func set() {
        done.store(true, ordering: .releasing)
    }
}

/// Turns SIGINT and SIGTERM into an `AsyncStream`; a second signal exits at once.
final class SignalWatcher: Sendable {
    let stream: AsyncStream<Int32>
    private let sources: Mutex<[any DispatchSourceSignal]>

    init() {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        self.stream = stream
        let received = Atomic<Int>(0)
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                if received.add(1, ordering: .relaxed).newValue > 1 {
                    try? FileHandle.standardError.write(contentsOf: Data("\nqueuekit: stopped at once; stored actions run again next time.\n".utf8))
                    exit(130)
                }
                continuation.yield(signalNumber)
            }
            source.resume()
            sources.append(source)
        }
        self.sources = Mutex(sources)
    }

    func stop() {
        let sources = self.sources.withLock { sources in
            defer { sources = [] }
            return sources
        }
        for source in sources {
            source.cancel()
        }
    }
}

/// Prints the live progress line: redrawn in place on a terminal, a plain line per second
/// otherwise (a log file, a pipe, CI).
final class ProgressPrinter: Sendable {
    let title: String
    let isTerminal: Bool
    let interval: Duration
    private let lastLine = Mutex<String>("")

    init(title: String) {
        self.title = title
        self.isTerminal = isatty(STDOUT_FILENO) == 1
        self.interval = isTerminal ? .milliseconds(200) : .seconds(1)
    }

    func show(_ counts: RunProgress.Counts, elapsed: Duration, force: Bool = false) {
        let seconds = elapsed.seconds
        let rate = seconds > 0 ? Double(counts.handled) / seconds : 0
        let eta = rate > 0 ? "\(Int((Double(counts.remaining) / rate).rounded(.up)))s" : "--"
        let done = counts.target > 0 ? counts.handled * 100 / counts.target : 100
        let line = "\(title) \(pad3(done))% | done \(grouped(counts.uploaded)) | failed \(grouped(counts.deadLettered))"
            + " | retrying \(counts.waiting.count) | \(grouped(Int(rate)))/s | ETA \(eta)"
        let changed = lastLine.withLock { last -> Bool in
            defer { last = line }
            return last != line
        }
        guard changed || force else { return }
        if isTerminal {
            write("\r\u{1B}[2K" + line)
        } else {
            write(line + "\n")
        }
    }

    /// Ends the line being redrawn on a terminal.
    func finishLine() {
        if isTerminal { write("\n") }
    }

    func note(_ text: String) {
        write(text + "\n")
    }

    private func write(_ text: String) {
        try? FileHandle.standardOutput.write(contentsOf: Data(text.utf8))
    }

    private func pad3(_ n: Int) -> String {
        String(repeating: " ", count: max(0, 3 - String(n).count)) + String(n)
    }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// `12345` as `12,345`.
func grouped(_ n: Int) -> String {
    let digits = String(n.magnitude)
    var out = ""
    for (index, character) in digits.enumerated() {
        if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
        out.append(character)
    }
    return n < 0 ? "-" + out : out
}
