#if canImport(Glibc)
import Glibc
#endif
import AsyncPrimitivesTesting
import Foundation
import TaskBroker

/// The action type of the crash helper (same JSON shape as its own `CrashAction`).
struct CrashAction: TaskQueueAction {
    var key: String
    var collection = "crash"
    var queueName: String
    var index: Int
}

/// One run of the `TaskBrokerCrashHelper` executable, with its stdout lines as they arrive.
final class CrashHelperRun: Sendable {
    let process: Process
    /// stdout lines; "EOF" when the process closed its stdout.
    let lines = EventCollector<String>()

    /// Feeds the helper's stdin (`serve` and `lock` wait for a line or its end).
    let input = Pipe()

    /// The helper's exit status, recorded by its `terminationHandler` (set before it starts).
    private let exits = EventCollector<Int32>()

    convenience init(database: String, log: String) throws {
        try self.init(arguments: [database, log])
    }

    init(arguments: [String], environment: [String: String] = [:]) throws {
        process = Process()
        process.executableURL = Self.helperURL
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardInput = input
        let exits = self.exits
        process.terminationHandler = { process in exits.record(process.terminationStatus) }
        try process.run()
        let handle = pipe.fileHandleForReading
        let lines = self.lines
        Thread.detachNewThread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.record(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer = Data(buffer[buffer.index(after: newline)...])
                }
            }
            lines.record("EOF")
        }
    }

    /// Waits for the next line after the first `count` lines ("cancelled" when the wait is).
    func line(after count: Int) async -> String {
        let lines = await lines.values(count: count + 1)
        return lines.count > count ? lines[count] : "cancelled"
    }

    /// Sends a line to the helper's stdin.
    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Closes the helper's stdin and waits for it to exit.
    func finish() async {
        try? input.fileHandleForWriting.close()
        await waitForExit()
    }

    /// Kills the helper with SIGKILL and waits until it is gone.
    func kill() async {
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
        await waitForExit()
    }

    /// Waits for the helper to exit, holding no thread. `Process.waitUntilExit()` spun a thread of
    /// the test's concurrency pool at 100 % of a core until the helper exited; when the helper was
    /// slow (a loaded machine) or never exited, the test's time limit could not end that wait and
    /// the whole test process ran on forever. A cancelled wait (the time limit) kills the helper.
    func waitForExit() async {
        if await exits.values(count: 1).isEmpty {
            _ = Glibc.kill(process.processIdentifier, SIGKILL)
        }
    }

    /// The helper sits next to the test bundle in the build directory.
    static var helperURL: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("TaskBrokerCrashHelper")
    }
}

/// A small seeded generator so that a failing crash run can be replayed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
