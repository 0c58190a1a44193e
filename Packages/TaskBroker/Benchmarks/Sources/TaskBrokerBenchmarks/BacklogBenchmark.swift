// A broker started over a large stored backlog: the time from `setup` to the first handler call,
// and the broker process's memory then, 3 s later and at its peak. Each measurement runs in a
// child process of its own (`backlog-child`), so that its memory is the broker's alone.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import TaskBroker
import TaskBrokerPostgres

enum BacklogBenchmark {
    /// Stored actions per backlog (`TB_BACKLOG_ACTIONS`, default 1,000,000).
    static let actions = ProcessInfo.processInfo.environment["TB_BACKLOG_ACTIONS"].flatMap { Int($0) } ?? 1_000_000
    /// Actions saved per transaction while the backlog is stored.
    static let batch = 10_000

    /// Stores each backlog shape on each backend and measures a broker started over it.
    static func run(postgresURL: String?) async throws {
        print("Backlog: a broker started over \(actions) stored actions (JSON payloads of ~60 bytes), one child process per row")
        print(padded("backend", 10) + padded("backlog", 34) + "setup → 1st call    RSS at call   RSS +3 s     peak")
        var backends = ["sqlite"]
        if postgresURL != nil { backends.append("postgres") }
        for backend in backends {
            for queues in [0, 10, 100_000] {
                let target = try await store(backend: backend, queues: queues, postgresURL: postgresURL)
                let arguments = ["backlog-child", backend] + target
                let result = try await runChild(arguments)
                let label = queues == 0 ? "empty" : "\(actions) in \(queues) queues"
                print(padded(backend, 10) + padded(label, 34) + result)
            }
        }
    }

    /// Stores the backlog (none when `queues` is 0) in a fresh SQLite file or PostgreSQL schema;
    /// returns the child's arguments that name it.
    private static func store(backend: String, queues: Int, postgresURL: String?) async throws -> [String] {
        let database: TaskDatabase
        let target: [String]
        if backend == "sqlite" {
            let path = try freshDirectory().appendingPathComponent("backlog.sqlite").path
            database = try await TaskDatabase.sqlite(path: path)
            target = [path]
        } else {
            let schema = "backlog_" + String(UInt32.random(in: .min ... .max), radix: 36)
            var configuration = try TaskDatabase.PostgresConfiguration(url: postgresURL ?? "")
            configuration.schema = schema
            database = try await TaskDatabase.postgres(configuration: configuration)
            target = [postgresURL ?? "", schema]
        }
        guard queues > 0 else { return target }
        var start = 0
        while start < actions {
            let end = min(start + batch, actions)
            try await database.save((start..<end).map { NoOpAction(key: "k\($0)", queueName: "bl-q\($0 % queues)") })
            start = end
        }
        return target
    }

    private static func padded(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(1, width - text.count))
    }

    private static func runChild(_ arguments: [String]) async throws -> String {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        child.arguments = arguments
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

    /// The child: opens the store, sets a broker up over it, and prints the time to the first
    /// handler call and its memory (VmRSS at the call and 3 s later, VmHWM).
    static func child(_ arguments: [String]) async throws -> Never {
        let database: TaskDatabase
        if arguments.first == "sqlite", arguments.count == 2 {
            database = try await TaskDatabase.sqlite(path: arguments[1])
        } else if arguments.first == "postgres", arguments.count == 3 {
            var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[1])
            configuration.schema = arguments[2]
            database = try await TaskDatabase.postgres(configuration: configuration)
            // An empty store: one action, so that there is a first call to wait for.
        } else {
            print("usage: backlog-child sqlite PATH | postgres URL SCHEMA")
            exit(2)
        }
        if try await database.snapshot().isEmpty {
            try await database.save(NoOpAction(key: "only", queueName: "bl-q0"))
        }
        let handler = FirstCall()
        let started = ContinuousClock.now
        _ = try await TaskQueueBroker.setup(database: database, name: "bl", handler: handler)
        let rssAtCall = await handler.called()
        let elapsed = started.duration(to: .now)
        try await Task.sleep(for: .seconds(3))
        let status = memoryStatus()
        print(String(
            format: "%16.3f s %11.0f MB %9.0f MB %7.0f MB", seconds(elapsed), rssAtCall, status.rss, status.peak
        ))
        exit(0)
    }

    /// VmRSS and VmHWM of this process, in MB.
    static func memoryStatus() -> (rss: Double, peak: Double) {
        let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        func value(_ key: String) -> Double {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }) else { return 0 }
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Double($0) } ?? 0
            return kilobytes / 1024
        }
        return (value("VmRSS"), value("VmHWM"))
    }
}

/// Notes the memory at the first call; later calls return at once (the broker drains the backlog
/// meanwhile: the figure 3 s later includes that work).
final class FirstCall: AsyncTaskQueueHandler {
    private let first = Countdown()
    private let rss = Mutex<Double?>(nil)

    func handle(_ action: NoOpAction, context _: TaskContext) async -> TaskResult {
        let isFirst = rss.withLock { value -> Bool in
            guard value == nil else { return false }
            value = BacklogBenchmark.memoryStatus().rss
            return true
        }
        if isFirst { first.tick() }
        return .success
    }

    /// Waits for the first call; returns the RSS then.
    func called() async -> Double {
        await first.wait(for: 1)
        return rss.withLock { $0 } ?? 0
    }
}
