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

    /// A build of the benchmarks to measure beside this one: `TB_BASELINE_BINARY` (its
    /// `TaskBrokerBenchmarks` executable, which `Scripts/bench.sh` builds from `TB_BASELINE_REF`)
    /// named `TB_BASELINE_LABEL`.
    static var baseline: (binary: String, label: String)? {
        let environment = ProcessInfo.processInfo.environment
        guard let binary = environment["TB_BASELINE_BINARY"], !binary.isEmpty else { return nil }
        return (binary, environment["TB_BASELINE_LABEL"] ?? "baseline")
    }

    /// Stores each backlog shape on each backend and measures a broker started over it, with this
    /// build and, if given, the baseline build (each stores its own copy of the backlog, in its
    /// own schema version, and measures it in a child process).
    static func run(postgresURL: String?) async throws {
        let this = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
        let builds = (baseline.map { [($0.label, $0.binary)] } ?? []) + [("this build", this)]
        print("Backlog: a broker started over \(actions) stored actions (JSON payloads of ~60 bytes), one child process per row")
        print(padded("backend", 10) + padded("backlog", 26) + padded("build", 22) + "setup → 1st call   RSS at call    RSS +3 s        peak")
        var backends = ["sqlite"]
        if postgresURL != nil { backends.append("postgres") }
        for backend in backends {
            for queues in [0, 10, 100_000] {
                let label = queues == 0 ? "empty" : "\(actions) in \(queues) q"
                var figures: [[Double]] = []
                for (name, binary) in builds {
                    let target = try await runToEnd(binary, ["backlog-store", backend, "\(queues)", postgresURL ?? ""])
                        .split(separator: "\n").map(String.init)
                    let numbers = try await runToEnd(binary, ["backlog-child", backend] + target)
                        .split(separator: " ").compactMap { Double($0) }
                    guard numbers.count == 4 else {
                        print(padded(backend, 10) + padded(label, 26) + padded(name, 22) + "failed")
                        continue
                    }
                    figures.append(numbers)
                    print(
                        padded(backend, 10) + padded(label, 26) + padded(name, 22)
                            + String(format: "%14.3f s %9.0f MB %9.0f MB %9.0f MB", numbers[0], numbers[1], numbers[2], numbers[3])
                    )
                }
                if figures.count == 2 {
                    let (old, new) = (figures[0], figures[1])
                    print(
                        padded("", 36) + padded("this / baseline", 22)
                            + String(format: "%14.3f × %9.2f × %9.2f × %9.2f ×", new[0] / old[0], new[1] / old[1], new[2] / old[2], new[3] / old[3])
                    )
                }
            }
        }
    }

    /// `backlog-store BACKEND QUEUES URL`: stores a backlog of ``actions`` in `QUEUES` queues (none
    /// for 0) in a fresh SQLite file or PostgreSQL schema, and prints the child's arguments that
    /// name it, one per line.
    static func store(_ arguments: [String]) async throws -> Never {
        guard arguments.count == 3, let queues = Int(arguments[1]) else {
            print("usage: backlog-store sqlite|postgres QUEUES URL")
            exit(2)
        }
        let database: TaskDatabase
        let target: [String]
        if arguments[0] == "sqlite" {
            let path = try freshDirectory().appendingPathComponent("backlog.sqlite").path
            database = try await TaskDatabase.sqlite(path: path)
            target = [path]
        } else {
            let schema = "backlog_" + String(UInt32.random(in: .min ... .max), radix: 36)
            var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[2])
            configuration.schema = schema
            database = try await TaskDatabase.postgres(configuration: configuration)
            target = [arguments[2], schema]
        }
        if queues > 0 {
            var start = 0
            while start < actions {
                let end = min(start + batch, actions)
                try await database.save((start..<end).map { NoOpAction(key: "k\($0)", queueName: "bl-q\($0 % queues)") })
                start = end
            }
        }
        print(target.joined(separator: "\n"))
        exit(0)
    }

    /// `backlog-child sqlite PATH | postgres URL SCHEMA`: opens the store, sets a broker up over
    /// it, and prints the time to the first handler call and its memory (VmRSS at the call and 3 s
    /// later, VmHWM).
    static func child(_ arguments: [String]) async throws -> Never {
        guard let database = try await openStore(arguments) else {
            print("usage: backlog-child sqlite PATH | postgres URL SCHEMA")
            exit(2)
        }
        // An empty store: one action, so that there is a first call to wait for.
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
        // Seconds to the first call, then RSS at it, 3 s later and at the peak, in MB.
        print(String(format: "%.4f %.1f %.1f %.1f", seconds(elapsed), rssAtCall, status.rss, status.peak))
        if arguments.first == "sqlite" {
            try? FileManager.default.removeItem(at: URL(fileURLWithPath: arguments[1]).deletingLastPathComponent())
        }
        exit(0)
    }

    /// The store a child names: `sqlite PATH` or `postgres URL SCHEMA`; `nil` for other arguments.
    static func openStore(_ arguments: [String]) async throws -> TaskDatabase? {
        if arguments.first == "sqlite", arguments.count == 2 {
            return try await TaskDatabase.sqlite(path: arguments[1])
        }
        guard arguments.first == "postgres", arguments.count == 3 else { return nil }
        var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[1])
        configuration.schema = arguments[2]
        return try await TaskDatabase.postgres(configuration: configuration)
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
