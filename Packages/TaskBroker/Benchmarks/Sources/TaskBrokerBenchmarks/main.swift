// TaskBroker benchmarks: the broker against raw GRDB with the same durability, measured in
// the same run on the same disk. Run with `make bench PACKAGE=TaskBroker`.
import Foundation
import GRDB
import Synchronization
import TaskBroker

let arguments = CommandLine.arguments
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
    let countdown = Countdown()

    func handle(_ action: NoOpAction, context _: TaskContext) async -> TaskResult {
        let now = ContinuousClock.now
        stamps.withLock { $0.append(now) }
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
    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [Bool] {
        try await inner.claim(heads, owner: owner, leaseDuration: leaseDuration)
    }
    func finish(_ outcomes: [TaskOutcome], owner: String) async throws { try await inner.finish(outcomes, owner: owner) }
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
