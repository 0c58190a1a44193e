import Dispatch
import Foundation
import Synchronization

/// What one run of the `queuekit` binary printed and how it exited.
struct ToolRun: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String

    var stderrLines: [Substring] { stderr.split(separator: "\n") }
}

/// Finds the `queuekit` binary that `swift build`/`swift test` put next to the test bundle.
enum QueuekitBinary {
    static let url: URL? = {
        var candidates: [URL] = []
        for start in [Bundle.main.executableURL, Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0])] {
            guard var folder = start?.deletingLastPathComponent() else { continue }
            for _ in 0..<4 {
                candidates.append(folder.appendingPathComponent("queuekit"))
                folder.deleteLastPathComponent()
            }
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }()

    /// Runs `queuekit` with `arguments` in `directory` and waits for it to exit.
    static func run(_ arguments: [String], in directory: URL) async throws -> ToolRun {
        guard let url else { throw MissingBinary() }
        let process = Process()
        process.executableURL = url
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardInput = FileHandle.nullDevice
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        // Read both pipes to the end on other threads (the child may fill a pipe before exiting),
        // then collect the exit status, without blocking the cooperative pool.
        return await withCheckedContinuation { (continuation: CheckedContinuation<ToolRun, Never>) in
            DispatchQueue.global().async {
                let group = DispatchGroup()
                let outData = Mutex(Data())
                let errData = Mutex(Data())
                DispatchQueue.global().async(group: group) {
                    let data = out.fileHandleForReading.readDataToEndOfFile()
                    outData.withLock { $0 = data }
                }
                DispatchQueue.global().async(group: group) {
                    let data = err.fileHandleForReading.readDataToEndOfFile()
                    errData.withLock { $0 = data }
                }
                group.wait()
                exited.wait()
                continuation.resume(returning: ToolRun(
                    status: process.terminationStatus,
                    stdout: String(decoding: outData.withLock { $0 }, as: UTF8.self),
                    stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self)
                ))
            }
        }
    }

    struct MissingBinary: Error, CustomStringConvertible {
        var description: String { "the queuekit binary was not found next to the test bundle; build the Integration package" }
    }
}

/// A `queuekit` process that is still running: read its output as it comes, signal it, wait.
final class RunningTool: Sendable {
    private struct State {
        var stdout = Data()
        var waiters: [(String, CheckedContinuation<Void, Never>)] = []
        var closed = false
    }

    private let process: Process
    private let out = Pipe()
    private let err = Pipe()
    private let state = Mutex(State())
    private let exited = DispatchSemaphore(value: 0)
    private let outputClosed = DispatchSemaphore(value: 0)

    convenience init(_ arguments: [String], in directory: URL) throws {
        guard let url = QueuekitBinary.url else { throw QueuekitBinary.MissingBinary() }
        try self.init(executable: url, arguments, in: directory)
    }

    /// Another program (`curl`, say), read the same way.
    init(executable url: URL, _ arguments: [String], in directory: URL) throws {
        process = Process()
        process.executableURL = url
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        process.terminationHandler = { [exited] _ in exited.signal() }
        try process.run()
        // Blocking reads on a thread of its own until EOF: Foundation's `readabilityHandler`
        // on Linux was seen to drop the EOF of a child that died (QueuePersistence's crash test).
        let handle = out.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                received(chunk)
                if chunk.isEmpty { break }
            }
        }
    }

    private func received(_ data: Data) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if data.isEmpty { state.closed = true } else { state.stdout.append(data) }
            let text = String(decoding: state.stdout, as: UTF8.self)
            let closed = state.closed
            let ready = state.waiters.filter { closed || text.contains($0.0) }.map(\.1)
            state.waiters.removeAll { closed || text.contains($0.0) }
            return ready
        }
        ready.forEach { $0.resume() }
        if data.isEmpty {
            outputClosed.signal()
        }
    }

    /// Returns once stdout contains `text` (or the process closed its output).
    func output(containing text: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.closed || String(decoding: state.stdout, as: UTF8.self).contains(text) { return true }
                state.waiters.append((text, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// A test that ends early (a failed expectation, its time limit) leaves no process behind.
    deinit {
        if process.isRunning { process.terminate() }
    }

    /// What the process printed on stdout so far.
    var outputSoFar: String {
        String(decoding: state.withLock { $0.stdout }, as: UTF8.self)
    }

    /// Sends SIGINT, as Ctrl-C does.
    func interrupt() {
        process.interrupt()
    }

    /// Waits for the process to exit and returns what it printed.
    func finish() async -> ToolRun {
        await withCheckedContinuation { (continuation: CheckedContinuation<ToolRun, Never>) in
            DispatchQueue.global().async { [self] in
                let errData = err.fileHandleForReading.readDataToEndOfFile()
                exited.wait()
                outputClosed.wait()
                continuation.resume(returning: ToolRun(
                    status: process.terminationStatus,
                    stdout: String(decoding: state.withLock { $0.stdout }, as: UTF8.self),
                    stderr: String(decoding: errData, as: UTF8.self)
                ))
            }
        }
    }
}
