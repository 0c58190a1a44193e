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
    private static func launch(_ arguments: [String]) throws -> (process: Process, lines: AsyncStream<String>) {
        let process = Process()
        process.executableURL = try helperURL()
        process.arguments = arguments
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
    private static func exitStatus(of process: Process) async -> Int32 {
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

    /// Runs the helper's file-size fault (`file-size-fault`) to its end and returns its lines
    /// and exit status.
    static func runFileSizeFault(backend: String, location: String, tag: String) async throws -> (lines: [String], status: Int32) {
        let (process, stream) = try launch([backend, location, tag, "1", "file-size-fault"])
        var lines: [String] = []
        for await line in stream {
            lines.append(line)
        }
        return (lines, await exitStatus(of: process))
    }
}
