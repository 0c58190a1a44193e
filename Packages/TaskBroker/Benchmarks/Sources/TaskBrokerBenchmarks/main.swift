// TaskBroker benchmarks: the broker against raw GRDB with the same durability, measured in
// the same run on the same disk. Run with `make bench PACKAGE=TaskBroker`.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import GRDB
import Synchronization
import TaskBroker

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine.
func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

let arguments = CommandLine.arguments
// `TaskBrokerBenchmarks enqueue-child PATH`: the other process of the cross-process latency run.
// Saves one action per line of stdin and prints the monotonic time right after each commit.
if arguments.count == 3, arguments[1] == "enqueue-child" {
    let database = try await TaskDatabase.sqlite(path: arguments[2])
    var stamps: [Int64] = []
    while let key = readLine() {
        try await database.save(NoOpAction(key: key, queueName: "bench-x"))
        stamps.append(monotonicNanoseconds())
    }
    print(stamps.map(String.init).joined(separator: "\n"))
    exit(0)
}
// `TaskBrokerBenchmarks pg-worker MODE URL SCHEMA [LEASE_MS]`: a worker of the PostgreSQL section.
if arguments.count >= 2, arguments[1] == "pg-worker" {
    try await runPostgresWorker(Array(arguments.dropFirst(2)))
    exit(0)
}
// `TaskBrokerBenchmarks backlog-store …`: stores a backlog for the backlog benchmark.
if arguments.count >= 2, arguments[1] == "backlog-store" {
    try await BacklogBenchmark.store(Array(arguments.dropFirst(2)))
}
// `TaskBrokerBenchmarks foreign-worker|foreign-saver …`: the processes of the foreign-save benchmark.
if arguments.count >= 2, arguments[1] == "foreign-worker" {
    try await ForeignSaveBenchmark.worker(Array(arguments.dropFirst(2)))
}
if arguments.count >= 2, arguments[1] == "foreign-saver" {
    try await ForeignSaveBenchmark.saver(Array(arguments.dropFirst(2)))
}
// `TaskBrokerBenchmarks backlog-child …`: one measurement of the backlog benchmark (BacklogBenchmark).
if arguments.count >= 2, arguments[1] == "backlog-child" {
    try await BacklogBenchmark.child(Array(arguments.dropFirst(2)))
}
let postgresURL = ProcessInfo.processInfo.environment["QUEUEKIT_PG_URL"].flatMap { $0.isEmpty ? nil : $0 }
// `TaskBrokerBenchmarks backlog`: the backlog benchmarks alone (PostgreSQL too if QUEUEKIT_PG_URL is set).
if arguments.count == 2, arguments[1] == "backlog" {
    try await BacklogBenchmark.run(postgresURL: postgresURL)
    try await ForeignSaveBenchmark.run(postgresURL: postgresURL)
    exit(0)
}
// `TaskBrokerBenchmarks pg`: the PostgreSQL section alone (needs QUEUEKIT_PG_URL).
if arguments.count == 2, arguments[1] == "pg" {
    guard let postgresURL else {
        print("TaskBrokerBenchmarks pg: set QUEUEKIT_PG_URL (Scripts/postgres.sh url)")
        exit(2)
    }
    try await PostgresBenchmarks.run(url: postgresURL)
    exit(0)
}
/// Actions in the burn-down (override with the first argument).
let burnDownCount = arguments.count > 1 ? Int(arguments[1]) ?? 100_000 : 100_000
let queueCount = 100
let clock = ContinuousClock()
/// `TaskBrokerBenchmarks 100000 burn` runs the burn-down alone, without its bounds (for profiling).
/// Environment: `TB_SYNC_OFF=1` runs the burn-down with synchronous=OFF (profiling only; printed).
let onlyBurnDown = arguments.count > 2 && arguments[2] == "burn"

struct NoOpAction: TaskQueueAction {
    var key: String
    var collection = "bench"
    var queueName: String
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func fmt(_ value: Double) -> String {
    String(format: value >= 100 ? "%.0f" : "%.2f", value)
}

func freshDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("TaskBrokerBench-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func rawPool(_ path: String) throws -> DatabasePool {
    let pool = try DatabasePool(path: path)
    // After the pool is open: GRDB sets synchronous=NORMAL when it enables WAL, which would
    // override a `prepareDatabase` setting (the first version of this benchmark fell for that).
    try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
    try pool.write { db in
        try db.execute(sql: "CREATE TABLE item (key TEXT PRIMARY KEY, queue TEXT NOT NULL, payload BLOB NOT NULL)")
    }
    return pool
}

/// Counts events and wakes waiters at their target counts.
final class Countdown: Sendable {
    private let state = Mutex<(count: Int, waiters: [(target: Int, continuation: CheckedContinuation<Void, Never>)])>((0, []))

    func tick() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count += 1
            guard !state.waiters.isEmpty else { return [] }
            let count = state.count
            let ready = state.waiters.filter { $0.target <= count }.map(\.continuation)
            state.waiters.removeAll { $0.target <= count }
            return ready
        }
        ready.forEach { $0.resume() }
    }

    func wait(for target: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.count >= target { return true }
                state.waiters.append((target, continuation))
                return false
            }
            if done { continuation.resume() }
        }
    }
}

final class NoOpHandler: AsyncTaskQueueHandler {
    let countdown = Countdown()

    func handle(_ action: NoOpAction, context _: TaskContext) async -> TaskResult {
        countdown.tick()
        return .success
    }
}

/// Records when the handler started, for the idle-to-start latency.
final class StampingHandler: AsyncTaskQueueHandler {
    let stamps = Mutex<[ContinuousClock.Instant]>([])
    let monotonicStamps = Mutex<[Int64]>([])
    let countdown = Countdown()

    func handle(_ action: NoOpAction, context _: TaskContext) async -> TaskResult {
        let now = ContinuousClock.now
        let monotonic = monotonicNanoseconds()
        stamps.withLock { $0.append(now) }
        monotonicStamps.withLock { $0.append(monotonic) }
        countdown.tick()
        return .success
    }
}

/// A backend decorator that stamps the moment a save has committed (before the broker is told).
final class CommitStampingStorage: TaskStorage {
    let inner: any TaskStorage
    let stamps = Mutex<[ContinuousClock.Instant]>([])

    init(_ inner: any TaskStorage) { self.inner = inner }

    func save(_ tasks: [NewTask]) async throws -> [StoredTask] {
        let saved = try await inner.save(tasks)
        let now = ContinuousClock.now
        stamps.withLock { $0.append(now) }
        return saved
    }
    func delete(key: String, collection: String) async throws -> StoredTask? { try await inner.delete(key: key, collection: collection) }
    func queueNames() async throws -> [String] { try await inner.queueNames() }
    func tasks(inQueue queueName: String) async throws -> [StoredTask] { try await inner.tasks(inQueue: queueName) }
    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [TaskClaimResult] {
        try await inner.claim(heads, owner: owner, leaseDuration: leaseDuration)
    }
    func finish(_ outcomes: [TaskOutcome], owner: String) async throws -> TaskFinishReport {
        try await inner.finish(outcomes, owner: owner)
    }
    func resume(queues queueNames: [String]) async throws -> [StoredTask] { try await inner.resume(queues: queueNames) }
    func purge(queue queueName: String) async throws -> Int { try await inner.purge(queue: queueName) }
    func snapshot() async throws -> [TaskQueueSnapshot] { try await inner.snapshot() }
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}

let directory = try freshDirectory()
defer { try? FileManager.default.removeItem(at: directory) }
print("TaskBroker benchmarks (release, WAL, synchronous=FULL, \(ProcessInfo.processInfo.activeProcessorCount) cores)")

// 1. The disk's single-commit fsync rate: one-row transactions on raw GRDB.
var fsyncRate = Double.nan
if !onlyBurnDown {
    let pool = try rawPool(directory.appendingPathComponent("fsync.sqlite").path)
    let commits = 300
    let elapsed = try clock.measure {
        for index in 0..<commits {
            try pool.write { db in
                try db.execute(sql: "INSERT INTO item VALUES (?, 'q', x'00')", arguments: ["k\(index)"])
            }
        }
    }
    fsyncRate = Double(commits) / seconds(elapsed)
    print("disk: single-commit rate \(fmt(fsyncRate)) commits/s (\(commits) one-row transactions)")
}

// 2. Raw GRDB bound: insert the burn-down's rows in one transaction, then delete them by key with
//    one commit per round of the 100 queues (100 deletes per commit), the best batching the broker can get.
var rawRate = Double.nan
if !onlyBurnDown {
    let pool = try rawPool(directory.appendingPathComponent("raw.sqlite").path)
    try pool.write { db in
        for index in 0..<burnDownCount {
            try db.execute(
                sql: "INSERT INTO item VALUES (?, ?, ?)",
                arguments: ["k\(index)", "q\(index % queueCount)", Data(repeating: 1, count: 60)]
            )
        }
    }
    let elapsed = try clock.measure {
        var index = 0
        while index < burnDownCount {
            let end = min(index + queueCount, burnDownCount)
            try pool.write { db in
                for key in index..<end {
                    try db.execute(sql: "DELETE FROM item WHERE key = ?", arguments: ["k\(key)"])
                }
            }
            index = end
        }
    }
    rawRate = Double(burnDownCount) / seconds(elapsed)
    print("raw GRDB: delete \(burnDownCount) rows, \(queueCount) per commit: \(fmt(rawRate)) rows/s")
}

// 3. Enqueue rates.
if !onlyBurnDown {
    let database = try await TaskDatabase.sqlite(path: directory.appendingPathComponent("enqueue.sqlite").path)
    let single = 300
    let singleTime = try await clock.measure {
        for index in 0..<single {
            try await database.save(NoOpAction(key: "s\(index)", queueName: "bench-q\(index % queueCount)"))
        }
    }
    let batch = (0..<burnDownCount).map { NoOpAction(key: "b\($0)", queueName: "bench-q\($0 % queueCount)") }
    let batchTime = try await clock.measure {
        try await database.save(batch)
    }
    let singleRate = Double(single) / seconds(singleTime)
    print("enqueue one at a time: \(fmt(singleRate)) actions/s (\(single) durable saves; disk bound \(fmt(fsyncRate)) commits/s, ratio \(fmt(singleRate / fsyncRate)))")
    print("enqueue in one transaction: \(fmt(Double(burnDownCount) / seconds(batchTime))) actions/s (\(burnDownCount) actions)")
}

// 4. Burn-down: the broker runs \(burnDownCount) stored no-op actions over 100 queues, durably.
do {
    let path = directory.appendingPathComponent("burn.sqlite").path
    // TB_SYNC_OFF=1 (profiling only): the broker's file without fsync, to see what the commits
    // cost; the figures are then not comparable with the bounds or the targets, and say so.
    let syncOff = ProcessInfo.processInfo.environment["TB_SYNC_OFF"] != nil
    if syncOff {
        print("burn-down: TB_SYNC_OFF is set: the broker's file uses synchronous=OFF (no fsync); NOT comparable with the bounds or targets")
    }
    let database = try await TaskDatabase.sqlite(path: path, configuration: .init(synchronous: syncOff ? .off : .full))
    try await database.save((0..<burnDownCount).map { NoOpAction(key: "k\($0)", queueName: "bench-q\($0 % queueCount)") })
    let handler = NoOpHandler()
    let start = clock.now
    let firstStart = Task {
        await handler.countdown.wait(for: 1)
        return start.duration(to: clock.now)
    }
    let broker = try await TaskQueueBroker.setup(
        database: database, name: "bench", handler: handler, configuration: .init(maxConcurrentQueues: queueCount)
    )
    await handler.countdown.wait(for: burnDownCount)
    await broker.shutdown()
    let elapsed = start.duration(to: clock.now)
    let left = try await database.snapshot().reduce(0) { $0 + $1.pending }
    let rate = Double(burnDownCount) / seconds(elapsed)
    print("burn-down: \(burnDownCount) actions over \(queueCount) queues in \(fmt(seconds(elapsed))) s = \(fmt(rate)) actions/s (\(left) left; first action started after \(fmt(seconds(await firstStart.value) * 1000)) ms of loading)")
    print("  vs raw GRDB bound \(fmt(rawRate)) rows/s: ratio \(fmt(rate / rawRate))  [target >= 0.50]")
    print("  vs disk single-commit rate \(fmt(fsyncRate))/s: ratio \(fmt(rate / fsyncRate))  [target >= 3.00]")
}

// 5. Idle-to-start latency: from the commit of a save to the handler's start, broker idle in between.
if !onlyBurnDown {
    let sqlite = try await TaskDatabase.sqlite(path: directory.appendingPathComponent("latency.sqlite").path)
    let storage = CommitStampingStorage(sqlite.storage)
    let database = TaskDatabase(storage: storage)
    let handler = StampingHandler()
    let broker = try await TaskQueueBroker.setup(database: database, name: "bench", handler: handler)
    let rounds = 500
    for index in 0..<rounds {
        try await database.save(NoOpAction(key: "l\(index)", queueName: "bench-q\(index % 10)"))
        await handler.countdown.wait(for: index + 1)
    }
    await broker.shutdown()
    let commits = storage.stamps.withLock { $0 }
    let starts = handler.stamps.withLock { $0 }
    let latencies = zip(commits, starts).map { seconds($0.duration(to: $1)) * 1000 }.sorted()
    print("idle-to-start: p50 \(String(format: "%.3f", percentile(latencies, 0.5))) ms, p99 \(String(format: "%.3f", percentile(latencies, 0.99))) ms over \(rounds) saves  [target p99 < 5 ms]")
}

// 6. The same latency when another process saves (the common app + worker deployment): from the
// commit in the other process to the handler's start here, seen through the file's change
// journal and an inotify watch, without polling.
if !onlyBurnDown {
    let path = directory.appendingPathComponent("cross.sqlite").path
    let database = try await TaskDatabase.sqlite(path: path)
    let handler = StampingHandler()
    let broker = try await TaskQueueBroker.setup(database: database, name: "bench", handler: handler)
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    child.arguments = ["enqueue-child", path]
    let input = Pipe()
    let output = Pipe()
    child.standardInput = input
    child.standardOutput = output
    try child.run()
    let rounds = 300
    for index in 0..<rounds {
        input.fileHandleForWriting.write(Data("x\(index)\n".utf8))
        await handler.countdown.wait(for: index + 1)
    }
    try input.fileHandleForWriting.close()
    let commits = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        .split(separator: "\n").compactMap { Int64($0) }
    child.waitUntilExit()
    await broker.shutdown()
    let starts = handler.monotonicStamps.withLock { $0 }
    let latencies = zip(commits, starts).map { Double($1 - $0) / 1e6 }.sorted()
    print("idle-to-start, saved by another process: p50 \(String(format: "%.3f", percentile(latencies, 0.5))) ms, p99 \(String(format: "%.3f", percentile(latencies, 0.99))) ms over \(latencies.count) saves  [target: starts within 100 ms]")
}

// 7. The PostgreSQL section (Scripts/bench.sh starts a throwaway server and sets QUEUEKIT_PG_URL).
if !onlyBurnDown {
    if let postgresURL {
        try await PostgresBenchmarks.run(url: postgresURL)
    } else {
        print("PostgreSQL: skipped (QUEUEKIT_PG_URL is not set; `make bench PACKAGE=TaskBroker` sets it)")
    }
}

// 8. A broker started over a large backlog, and a worker's CPU per save made by another process,
// on each backend (BacklogBenchmark, ForeignSaveBenchmark).
if !onlyBurnDown {
    try await BacklogBenchmark.run(postgresURL: postgresURL)
    try await ForeignSaveBenchmark.run(postgresURL: postgresURL)
}
