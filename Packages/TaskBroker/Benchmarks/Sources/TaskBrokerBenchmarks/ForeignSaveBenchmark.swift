// A worker's CPU per save made by another process (a web application enqueueing while workers
// run): the worker holds 10 queues of N stored actions each (its handler holds every queue's head
// for the whole run), another process saves 500 single actions into them, and the worker's CPU
// time (user + system, getrusage) from the first save to 2 s after the last is divided by the
// saves. Measured with queues of 100 and of 10,000 stored actions, with this build and the baseline.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TaskBroker
import TaskBrokerPostgres

enum ForeignSaveBenchmark {
    static let queues = 10
    static let saves = 500

    static func run(postgresURL: String?) async throws {
        let this = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
        let builds = (BacklogBenchmark.baseline.map { [($0.label, $0.binary)] } ?? []) + [("this build", this)]
        print("Saves by another process: \(saves) single saves into \(queues) queues that a worker holds (its handler holds each head)")
        print(padded("backend", 10) + padded("stored per queue", 18) + padded("build", 22) + "worker CPU per save   saves took")
        var backends = ["sqlite"]
        if postgresURL != nil { backends.append("postgres") }
        for backend in backends {
            for depth in [100, 10_000] {
                var perSave: [Double] = []
                for (name, binary) in builds {
                    let target = try await runToEnd(
                        binary, ["backlog-store", backend, "\(queues)", postgresURL ?? ""],
                        environment: ["TB_BACKLOG_ACTIONS": "\(depth * queues)"]
                    ).split(separator: "\n").map(String.init)
                    let inbox = LineInbox()
                    let worker = try BenchmarkChild.start(["foreign-worker", backend] + target, binary: binary, inbox: inbox)
                    defer { worker.kill() }
                    guard await inbox.next(startingWith: "ready", timeout: .seconds(120)) != nil else {
                        print(padded(backend, 10) + padded("\(depth)", 18) + padded(name, 22) + "the worker did not start")
                        continue
                    }
                    worker.send("start")
                    _ = await inbox.next(startingWith: "started", timeout: .seconds(10))
                    let took = try await runToEnd(binary, ["foreign-saver", backend] + target)
                    try await Task.sleep(for: .seconds(2))
                    worker.send("stop")
                    guard let line = await inbox.next(startingWith: "cpu ", timeout: .seconds(30)),
                          let cpu = Double(line.dropFirst(4)) else { continue }
                    let milliseconds = cpu * 1000 / Double(saves)
                    perSave.append(milliseconds)
                    print(padded(backend, 10) + padded("\(depth)", 18) + padded(name, 22) + String(format: "%16.2f ms", milliseconds) + "   \(took) s")
                }
                if perSave.count == 2 {
                    print(padded("", 28) + padded("this / baseline", 22) + String(format: "%16.2f ×", perSave[1] / perSave[0]))
                }
            }
        }
    }

    /// `foreign-worker sqlite PATH | postgres URL SCHEMA`: a broker over the store whose handler
    /// holds every action; prints `ready` once every queue's head runs, measures its CPU time from
    /// the line `start` to the line `stop` and prints it (`cpu SECONDS`).
    static func worker(_ arguments: [String]) async throws -> Never {
        guard let database = try await BacklogBenchmark.openStore(arguments) else {
            print("usage: foreign-worker|foreign-saver sqlite PATH | postgres URL SCHEMA")
            exit(2)
        }
        let handler = ForeignSaveHandler()
        let broker = try await TaskQueueBroker.setup(
            database: database, name: "bl", handler: handler, configuration: .init(maxConcurrentQueues: queues)
        )
        await handler.started.wait(for: queues)
        emit("ready")
        _ = readLine()
        let before = cpuSeconds()
        emit("started")
        _ = readLine()
        emit("cpu \(cpuSeconds() - before)")
        _ = broker
        exit(0)
    }

    /// `foreign-saver sqlite PATH | postgres URL SCHEMA`: saves ``saves`` actions one at a time;
    /// prints how long they took.
    static func saver(_ arguments: [String]) async throws -> Never {
        guard let database = try await BacklogBenchmark.openStore(arguments) else {
            print("usage: foreign-worker|foreign-saver sqlite PATH | postgres URL SCHEMA")
            exit(2)
        }
        let start = ContinuousClock.now
        for index in 0..<saves {
            try await database.save(NoOpAction(key: "foreign\(index)", queueName: "bl-q\(index % queues)"))
        }
        print(String(format: "%.2f", seconds(start.duration(to: .now))))
        exit(0)
    }

    /// User and system CPU time of this process, in seconds.
    private static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        func value(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return value(usage.ru_utime) + value(usage.ru_stime)
    }
}

/// Holds every action it is given for as long as the process runs.
final class ForeignSaveHandler: AsyncTaskQueueHandler {
    let started = Countdown()

    func handle(_ action: NoOpAction, context _: TaskContext) async -> TaskResult {
        started.tick()
        try? await Task.sleep(for: .seconds(86_400))
        return .success
    }
}
