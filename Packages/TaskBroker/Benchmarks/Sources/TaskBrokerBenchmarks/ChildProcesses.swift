// Plumbing of the PostgreSQL benchmarks' worker processes: the lines they print, read on
// threads of their own (blocking reads never run on Swift's cooperative pool).
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// The lines printed by the benchmark's child processes, in arrival order, for one consumer.
final class LineInbox: Sendable {
    private struct State {
        var lines: [String] = []
        var consumed = 0
        var waiter: (id: UInt64, continuation: CheckedContinuation<String?, Never>)?
        var nextID: UInt64 = 0
        /// The newest wait whose timeout has passed (it may pass before the wait is registered).
        var expiredID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Appends a line; hands it to the waiting consumer, if any.
    func append(_ line: String) {
        let waiter = state.withLock { state -> CheckedContinuation<String?, Never>? in
            state.lines.append(line)
            guard let waiter = state.waiter else { return nil }
            state.waiter = nil
            state.consumed += 1
            return waiter.continuation
        }
        waiter?.resume(returning: line)
    }

    /// The next line not read yet, or `nil` when none arrives within `timeout`.
    func next(timeout: Duration) async -> String? {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.expire(id)
            }
            let line = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                // .some(line) or .some(nil) (timed out already): resume at once; nil: wait.
                let ready = state.withLock { state -> String?? in
                    if state.consumed < state.lines.count {
                        state.consumed += 1
                        return .some(state.lines[state.consumed - 1])
                    }
                    if state.expiredID >= id { return .some(nil) }
                    state.waiter = (id, continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
            group.cancelAll()
            return line
        }
    }

    /// The next line that starts with `prefix` (skipping others), or `nil` after `timeout`.
    func next(startingWith prefix: String, timeout: Duration) async -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let line = await next(timeout: ContinuousClock.now.duration(to: deadline)) else { return nil }
            if line.hasPrefix(prefix) { return line }
        }
        return nil
    }

    private func expire(_ id: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<String?, Never>? in
            state.expiredID = max(state.expiredID, id)
            guard let waiter = state.waiter, waiter.id == id else { return nil }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume(returning: nil)
    }
}

/// A worker process of the PostgreSQL benchmarks: the benchmark binary in a worker mode. Its
/// stdout lines go to an inbox (shared by several workers; each line names the worker's pid), and
/// `eof PID` follows its last line.
struct BenchmarkChild {
    let process: Process
    let input: Pipe
    let output: Pipe

    var pid: Int32 { process.processIdentifier }

    /// Starts `binary` (this benchmark's own executable by default) with `arguments`.
    static func start(_ arguments: [String], binary: String? = nil, inbox: LineInbox) throws -> BenchmarkChild {
        let process = Process()
        process.executableURL = binary.map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        process.arguments = arguments
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let pid = process.processIdentifier
        let descriptor = output.fileHandleForReading.fileDescriptor
        // Ends at EOF, which comes when the child exits; the parent waits for `eof PID`.
        let reader = Thread {
            var pending = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                pending += buffer[0..<count]
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    inbox.append(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
            }
            inbox.append("eof \(pid)")
        }
        reader.start()
        return BenchmarkChild(process: process, input: input, output: output)
    }

    /// Sends one line to the child's stdin.
    func send(_ line: String) {
        input.fileHandleForWriting.write(Data("\(line)\n".utf8))
    }

    /// Closes the child's stdin: a worker then shuts its broker down and exits.
    func closeInput() {
        try? input.fileHandleForWriting.close()
    }

    /// SIGKILL, if the child still runs (never a pid the child had once).
    func kill() {
        guard process.isRunning else { return }
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
    }
}

/// Runs `binary` with `arguments` (and `environment` added to this process's) to its end;
/// returns what it printed, trimmed.
func runToEnd(_ binary: String, _ arguments: [String], environment: [String: String] = [:]) async throws -> String {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: binary)
    child.arguments = arguments
    child.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let output = Pipe()
    child.standardOutput = output
    try child.run()
    // Read on a thread of its own: a blocking read never runs on the cooperative pool.
    let text = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
        Thread.detachNewThread {
            let data = output.fileHandleForReading.readDataToEndOfFile()
            child.waitUntilExit()
            continuation.resume(returning: String(decoding: data, as: UTF8.self))
        }
    }
    return text.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// `text` padded with spaces to `width` characters (at least one space).
func padded(_ text: String, _ width: Int) -> String {
    text + String(repeating: " ", count: max(1, width - text.count))
}

/// Writes a line to stdout at once (unbuffered: the parent reads it through a pipe).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data("\(line)\n".utf8))
}
