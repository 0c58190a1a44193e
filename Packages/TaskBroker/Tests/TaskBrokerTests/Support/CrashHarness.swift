#if canImport(Glibc)
import Glibc
#endif
import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

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
    /// The monotonic times of the `pg-worker` handler's stamps on stdout ("S <key> <pid> <ns>" as
    /// an action starts, "E …" as its handler returns), as they arrive.
    let starts = EventCollector<Int64>()
    let ends = EventCollector<Int64>()

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
        let starts = self.starts
        let ends = self.ends
        Thread.detachNewThread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    lines.record(line)
                    let fields = line.split(separator: " ")
                    if fields.count == 4, let time = Int64(fields[3]) {
                        if fields[0] == "S" { starts.record(time) }
                        if fields[0] == "E" { ends.record(time) }
                    }
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

    /// Whether the `pg-worker` has said that an action started and not yet that it returned.
    var saysAnActionRuns: Bool {
        starts.count > ends.count
    }

    /// Waits until the helper process is stopped (SIGSTOP has taken effect: the kernel reports it
    /// to its parent, this process), on a thread of its own. The stop stays reported (`WNOWAIT`).
    func waitUntilStopped() async {
        let pid = process.processIdentifier
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                var info = siginfo_t()
                while waitid(P_PID, id_t(pid), &info, WSTOPPED | WNOWAIT) == -1, errno == EINTR {}
                continuation.resume()
            }
        }
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


/// Waits for `event` until `deadline` at most: whether it came first.
func arrives(_ event: @escaping @Sendable () async -> Void, before deadline: ContinuousClock.Instant) async -> Bool {
    await withTaskGroup(of: Bool.self) { group in
        group.addTask {
            await event()
            return !Task.isCancelled
        }
        group.addTask {
            try? await Task.sleep(until: deadline, clock: .continuous)
            return false
        }
        let first = await group.next() ?? false
        group.cancelAll()
        return first
    }
}

/// Records into ``emptied`` once the database stores no action (live, paused or dead letter):
/// checked when the watch starts and again at each change another handle on the database makes
/// (`queueChanges()`), with no polling.
final class EmptyWatch: Sendable {
    let emptied = EventCollector<Bool>()
    private let task: Task<Void, Never>

    init(_ database: TaskDatabase) async throws {
        // Listening before the first look: a change between the two is not missed.
        let changes = try await database.queueChanges()
        let emptied = emptied
        task = Task {
            do {
                if try await database.snapshot().isEmpty { return emptied.record(true) }
                for await _ in changes {
                    if try await database.snapshot().isEmpty { return emptied.record(true) }
                }
            } catch {
                Issue.record(error, "the watch for an empty database could not read it")
            }
        }
    }

    /// Waits until the database is empty (returns early when the waiting task is cancelled).
    func wait() async {
        _ = await emptied.values(count: 1)
    }

    deinit {
        task.cancel()
    }
}
