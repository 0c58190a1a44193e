import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// Runs `QueuePersistenceCrashHelper` (built by `swift test` next to the test bundle) and
/// kills it with SIGKILL once it has acknowledged a number of jobs.
enum CrashHelperProcess {
    struct Outcome {
        /// Ids whose `persist` returned before the kill.
        var persisted: [String] = []
        /// Ids whose `delete` returned before the kill.
        var deleted: [String] = []
    }

    struct HelperNotFound: Error, CustomStringConvertible {
        let searched: [String]
        var description: String { "QueuePersistenceCrashHelper not found in \(searched)" }
    }

    /// The helper binary: in the build folder that holds this test bundle.
    static func helperURL() throws -> URL {
        var folders: [URL] = []
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            folders.append(bundle.bundleURL.deletingLastPathComponent())
        }
        if let executable = Bundle.main.executableURL {
            folders.append(executable.deletingLastPathComponent())
            // macOS: …/debug/X.xctest/Contents/MacOS/X
            folders.append(
                executable.deletingLastPathComponent().deletingLastPathComponent()
                    .deletingLastPathComponent().deletingLastPathComponent()
            )
        }
        folders.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
        for folder in folders {
            let candidate = folder.appendingPathComponent("QueuePersistenceCrashHelper")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw HelperNotFound(searched: folders.map(\.path))
    }

    /// Starts the helper with `arguments`; its stdout lines arrive on the returned stream.
    private static func launch(_ arguments: [String], input: Pipe? = nil) throws -> (process: Process, lines: AsyncStream<String>) {
        let process = Process()
        process.executableURL = try helperURL()
        process.arguments = arguments
        if let input { process.standardInput = input }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let (lines, linesContinuation) = AsyncStream.makeStream(of: String.self)
        try process.run()
        // Blocking reads on a thread of its own until EOF. Foundation's `readabilityHandler`
        // on Linux was seen to drop the EOF of a killed child, leaving this test waiting forever.
        let handle = output.fileHandleForReading
        Thread.detachNewThread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    linesContinuation.yield(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer = Data(buffer[buffer.index(after: newline)...])
                }
            }
            linesContinuation.finish()
        }
        return (process, lines)
    }

    /// The helper's exit status, once it has exited.
    fileprivate static func exitStatus(of process: Process) async -> Int32 {
        // `waitUntilExit()`, as TaskBroker's crash harness does, rather than a `terminationHandler`.
        await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            DispatchQueue.global().async {
                process.waitUntilExit()
                continuation.resume(returning: process.terminationStatus)
            }
        }
    }

    /// Starts the helper, waits for `acknowledgements` printed `P` lines, kills it with
    /// SIGKILL, and returns every acknowledgement it printed before it died.
    static func runAndKill(
        backend: String,
        location: String,
        tag: String,
        threads: Int,
        acknowledgements: Int
    ) async throws -> (outcome: Outcome, status: Int32) {
        let (process, lines) = try launch([backend, location, tag, String(threads)])
        let pid = process.processIdentifier
        var outcome = Outcome()
        var killed = false
        for await line in lines {
            if line.hasPrefix("P ") {
                outcome.persisted.append(String(line.dropFirst(2)))
            } else if line.hasPrefix("D ") {
                outcome.deleted.append(String(line.dropFirst(2)))
            }
            if !killed, outcome.persisted.count >= acknowledgements {
                kill(pid, SIGKILL)
                killed = true
            }
        }
        if !killed { kill(pid, SIGKILL) }
        return (outcome, await exitStatus(of: process))
    }

    /// Runs one of the helper's faults (`file-size-fault`, `read-only-fault`) to its end and
    /// returns its lines and exit status.
    static func runFault(_ fault: String, backend: String, location: String, tag: String) async throws -> (lines: [String], status: Int32) {
        let (process, stream) = try launch([backend, location, tag, "1", fault])
        var lines: [String] = []
        for await line in stream {
            lines.append(line)
        }
        return (lines, await exitStatus(of: process))
    }

    /// Another process holding SQLite's write lock on a database (`BEGIN EXCLUSIVE`) until
    /// ``release()``.
    struct LockHolder {
        fileprivate let process: Process
        fileprivate let input: Pipe
        fileprivate var lines: AsyncStream<String>.AsyncIterator

        /// Commits the holder's transaction and waits for it to exit.
        /// - Returns: The holder's last line (`released`) and exit status.
        mutating func release() async -> (line: String?, status: Int32) {
            input.fileHandleForWriting.write(Data("release\n".utf8))
            let line = await lines.next()
            return (line, await CrashHelperProcess.exitStatus(of: process))
        }
    }

    /// Starts a helper that takes SQLite's write lock on the database at `path`, and returns once
    /// it holds it.
    static func holdWriteLock(on path: String) async throws -> LockHolder {
        let input = Pipe()
        let (process, lines) = try launch(["lock", path], input: input)
        var iterator = lines.makeAsyncIterator()
        let first = await iterator.next()
        guard first == "locked" else {
            kill(process.processIdentifier, SIGKILL)
            throw LockNotTaken(line: first)
        }
        return LockHolder(process: process, input: input, lines: iterator)
    }

    struct LockNotTaken: Error, CustomStringConvertible {
        let line: String?
        var description: String { "the helper did not take the write lock: \(line ?? "no output")" }
    }
}
