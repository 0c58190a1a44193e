#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import InMemoryTracing
import Synchronization
import TaskBroker

// The helper's actions, handlers and logs, which its modes (main.swift) share.

struct CrashAction: TaskQueueAction {
    var key: String
    var collection: String
    var queueName: String
    var index: Int
}

/// Appends lines to a file and fsyncs each one.
final class DurableLog: Sendable {
    private let descriptor: Mutex<Int32>

    init(path: String) {
        descriptor = Mutex(open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644))
    }

    func append(_ line: String) {
        descriptor.withLock { fd in
            let bytes = Array((line + "\n").utf8)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            _ = fsync(fd)
        }
    }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

final class CrashHandler: AsyncTaskQueueHandler {
    let log: DurableLog

    init(log: DurableLog) {
        self.log = log
    }

    func handle(_ action: CrashAction, context _: TaskContext) async -> TaskResult {
        log.append("start \(action.key)")
        log.append("done \(action.key)")
        say("done \(action.key)")
        return .success
    }
}

final class ServeHandler: AsyncTaskQueueHandler {
    func handle(_ action: CrashAction, context _: TaskContext) async -> TaskResult {
        say("done \(action.key)")
        return .success
    }
}

/// Says when each action starts.
final class StartReportingHandler: AsyncTaskQueueHandler {
    func handle(_ action: CrashAction, context _: TaskContext) async -> TaskResult {
        say("start \(action.key) \(Int64(Date().timeIntervalSince1970 * 1000))")
        return .success
    }
}

/// Says when each run starts and ends; each takes 2–10 ms.
final class RunReportingHandler: AsyncTaskQueueHandler {
    func handle(_ action: CrashAction, context _: TaskContext) async -> TaskResult {
        say("start \(action.key)")
        try? await Task.sleep(for: .milliseconds(Int.random(in: 2...10)))
        say("done \(action.key)")
        return .success
    }
}

/// Waits for a line (or the end) on stdin, on a thread of its own.
func stdinLine() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            _ = readLine()
            continuation.resume()
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine.
func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// Appends lines with plain writes (the kernel keeps them when the process is killed).
final class StampLog: Sendable {
    private let descriptor: Int32

    init(path: String) {
        descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
    }

    func append(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }
}

final class StampingHandler: AsyncTaskQueueHandler {
    let log: StampLog
    let pid = getpid()

    init(log: StampLog) {
        self.log = log
    }

    func handle(_ action: CrashAction, context _: TaskContext) async -> TaskResult {
        stamp("S \(action.key) \(pid) \(monotonicNanoseconds())")
        // 2–10 ms (1–5 ms before): the faster broker finished the 20,000 actions after as few as 4
        // kills, near the test's minimum of 3; longer handlers keep the run long enough for more
        // kills without more work for the restarted workers to read at startup.
        try? await Task.sleep(for: .milliseconds(Int.random(in: 2...10)))
        stamp("E \(action.key) \(pid) \(monotonicNanoseconds())")
        return .success
    }

    /// Logs the stamp, then says it: the log is the record (complete once the process is gone),
    /// stdout what a test awaits while the process runs.
    private func stamp(_ line: String) {
        log.append(line)
        say(line)
    }
}

/// The actions `pg-save-if-absent` saves: `count` keys over five queues.
func uniqueActions(count: Int) -> [CrashAction] {
    (0..<count).map { CrashAction(key: "unique-\($0)", collection: "crash", queueName: "crash-unique-\($0 % 5)", index: $0) }
}

/// Sets a broker up, says "ready", runs it until stdin closes, shuts it down and exits (an error
/// is said and exits 1).
func serveUntilStdinCloses(_ setUp: () async throws -> TaskQueueBroker) async -> Never {
    do {
        let broker = try await setUp()
        say("ready")
        await stdinLine()
        await broker.shutdown()
        exit(0)
    } catch {
        say("error \(error)")
        exit(1)
    }
}

/// An in-memory tracer whose IDs no other process repeats (the default counts from 1 in each):
/// a span that did not get its parent from the stored context cannot match it by chance.
func uniqueTracer() -> InMemoryTracer {
    InMemoryTracer(idGenerator: .init(nextTraceID: { "trace-\(UUID().uuidString)" }, nextSpanID: { "span-\(UUID().uuidString)" }))
}
