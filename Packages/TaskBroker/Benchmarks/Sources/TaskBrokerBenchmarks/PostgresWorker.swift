// `TaskBrokerBenchmarks pg-worker MODE URL SCHEMA [LEASE_MS]`: a worker process of the
// PostgreSQL benchmarks. It sets up a broker named "bench" on the schema, prints `ready PID`, and
// runs until its stdin closes (then it shuts the broker down and exits). Modes:
//   burn      no-op handler, 512 queues at once, starts on a `go` line; prints the storage calls
//             it made (`stats PID …`) when it stops
//   latency   prints `started KEY MONOTONIC_NS` as each action starts
//   takeover  prints `started KEY ATTEMPT PID MONOTONIC_NS`, then sleeps 60 s in the handler
//   parallel  no-op handler for plain parallel actions (`TB_PG_PARALLEL` at once, 4,096 by default),
//             starts on a `go` line, prints `applied PID TOTAL` after each finish
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import TaskBroker
import TaskBrokerPostgres

/// Counts the storage calls a worker's broker makes (one claim is one round trip and one
/// commit; one finish is one statement that also sends the notifications: one round trip, one commit).
final class CountingStorage: TaskStorage {
    let inner: any TaskStorage
    let claims = Atomic<Int>(0)
    let claimedHeads = Atomic<Int>(0)
    /// Claimed heads granted, and refused because another worker held the queue.
    let granted = Atomic<Int>(0)
    let refused = Atomic<Int>(0)
    /// Announcements of spare capacity (asks for queues) sent to the pool.
    let asks = Atomic<Int>(0)
    /// Queues read whole (first reads), and those of them another worker held.
    let firstReadQueues = Atomic<Int>(0)
    let heldReadQueues = Atomic<Int>(0)
    /// Leases the reads took (their heads start without a claim).
    let readClaimed = Atomic<Int>(0)
    /// Queues read ahead, and outcomes whose finish claimed no next head (it lets the queue go).
    let readAheadQueues = Atomic<Int>(0)
    let lettingGo = Atomic<Int>(0)
    let finishes = Atomic<Int>(0)
    let finishedOutcomes = Atomic<Int>(0)
    let reads = Atomic<Int>(0)
    let renewals = Atomic<Int>(0)
    /// Outcomes a finish refused (lease lost) or found outdated.
    let fenced = Atomic<Int>(0)
    let outdated = Atomic<Int>(0)
    /// Next heads claimed with their predecessors' outcomes.
    let continued = Atomic<Int>(0)
    /// Outcomes stored (neither refused nor outdated), so far.
    let applied = Atomic<Int>(0)
    /// Whether each finish prints `applied PID TOTAL` (the burn-down's clock stops when the
    /// workers' totals reach the number of stored actions: no polling of the server while it runs).
    let reportsProgress: Bool
    /// Nanoseconds spent inside claims, finishes and reads (calls may overlap).
    let claimNanoseconds = Atomic<Int>(0)
    let finishNanoseconds = Atomic<Int>(0)
    let readNanoseconds = Atomic<Int>(0)

    init(_ inner: any TaskStorage, reportsProgress: Bool = false) {
        self.inner = inner
        self.reportsProgress = reportsProgress
    }

    /// Counts what a finish stored (a burn-down queue has one outcome per finish, so the report's
    /// sets of queue names count outcomes) and prints the total if asked to.
    private func count(_ report: TaskFinishReport, of outcomes: Int) {
        fenced.add(report.fenced.count, ordering: .relaxed)
        outdated.add(report.outdated.count, ordering: .relaxed)
        continued.add(report.continued.count, ordering: .relaxed)
        let stored = outcomes - report.fenced.count - report.outdated.count
        let total = applied.add(stored, ordering: .relaxed).newValue
        if reportsProgress { emit("applied \(getpid()) \(total)") }
    }

    static let claimsNextHeads = ProcessInfo.processInfo.environment["TB_PG_NO_NEXT"] != "1"
    static let readsClaim = ProcessInfo.processInfo.environment["TB_PG_NO_READ_CLAIMS"] != "1"

    var summary: String {
        "claims=\(claims.load(ordering: .relaxed)) heads=\(claimedHeads.load(ordering: .relaxed)) "
            + "finishes=\(finishes.load(ordering: .relaxed)) outcomes=\(finishedOutcomes.load(ordering: .relaxed)) "
            + "reads=\(reads.load(ordering: .relaxed)) renewals=\(renewals.load(ordering: .relaxed)) "
            + "claimms=\(claimNanoseconds.load(ordering: .relaxed) / 1_000_000) finishms=\(finishNanoseconds.load(ordering: .relaxed) / 1_000_000) "
            + "readms=\(readNanoseconds.load(ordering: .relaxed) / 1_000_000) cpums=\(cpuMilliseconds()) "
            + "fenced=\(fenced.load(ordering: .relaxed)) outdated=\(outdated.load(ordering: .relaxed)) "
            + "continued=\(continued.load(ordering: .relaxed)) granted=\(granted.load(ordering: .relaxed)) "
            + "refused=\(refused.load(ordering: .relaxed)) asks=\(asks.load(ordering: .relaxed)) "
            + "readqueues=\(firstReadQueues.load(ordering: .relaxed)) heldqueues=\(heldReadQueues.load(ordering: .relaxed)) "
            + "readclaimed=\(readClaimed.load(ordering: .relaxed)) aheads=\(readAheadQueues.load(ordering: .relaxed)) "
            + "letgo=\(lettingGo.load(ordering: .relaxed))"
    }

    func save(_ tasks: [NewTask]) async throws -> [StoredTask] { try await inner.save(tasks) }
    func delete(key: String, collection: String) async throws -> StoredTask? { try await inner.delete(key: key, collection: collection) }
    func queueNames() async throws -> [String] { try await inner.queueNames() }
    func tasks(inQueue queueName: String) async throws -> [StoredTask] {
        reads.add(1, ordering: .relaxed)
        let start = monotonicNanoseconds()
        defer { readNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed) }
        return try await inner.tasks(inQueue: queueName)
    }
    func tasks(inQueues queueNames: [String]) async throws -> [String: [StoredTask]] {
        reads.add(1, ordering: .relaxed)
        let start = monotonicNanoseconds()
        defer { readNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed) }
        return try await inner.tasks(inQueues: queueNames)
    }
    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [TaskClaimResult] {
        claims.add(1, ordering: .relaxed)
        claimedHeads.add(heads.count, ordering: .relaxed)
        let start = monotonicNanoseconds()
        defer { claimNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed) }
        let results = try await inner.claim(heads, owner: owner, leaseDuration: leaseDuration)
        for result in results {
            switch result {
            case .granted: granted.add(1, ordering: .relaxed)
            case .heldElsewhere: refused.add(1, ordering: .relaxed)
            case .changed: break
            }
        }
        return results
    }
    func finish(_ outcomes: [TaskOutcome], owner: String) async throws -> TaskFinishReport {
        finishes.add(1, ordering: .relaxed)
        finishedOutcomes.add(outcomes.count, ordering: .relaxed)
        let start = monotonicNanoseconds()
        defer { finishNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed) }
        let report = try await inner.finish(outcomes, owner: owner)
        count(report, of: outcomes.count)
        return report
    }
    func finish(
        _ outcomes: [TaskOutcome], claimingNext nextHeads: [String: StoredTask], owner: String, leaseDuration: Duration
    ) async throws -> TaskFinishReport {
        finishes.add(1, ordering: .relaxed)
        finishedOutcomes.add(outcomes.count, ordering: .relaxed)
        lettingGo.add(outcomes.count - nextHeads.count, ordering: .relaxed)
        let start = monotonicNanoseconds()
        defer { finishNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed) }
        // `TB_PG_NO_NEXT=1`: finishes claim no next head (every head is claimed on its own, as before
        // finishes claimed them), for A/B runs of one binary.
        let report = try await inner.finish(
            outcomes, claimingNext: Self.claimsNextHeads ? nextHeads : [:], owner: owner, leaseDuration: leaseDuration
        )
        count(report, of: outcomes.count)
        return report
    }
    func tasks(inQueues queueNames: [String], after positions: [String: Int64], limit: Int) async throws -> [String: [StoredTask]] {
        reads.add(1, ordering: .relaxed)
        readAheadQueues.add(queueNames.count, ordering: .relaxed)
        let start = monotonicNanoseconds()
        defer { readNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed) }
        return try await inner.tasks(inQueues: queueNames, after: positions, limit: limit)
    }
    // What the broker asks for beside claims, finishes and reads, forwarded as it is: a wrapper
    // that left one to the protocol's default would measure another broker (one that reads queues
    // whole, or never hears a pool's asks).
    func saveIfAbsent(_ task: NewTask) async throws -> StoredTask? { try await inner.saveIfAbsent(task) }
    func queueNames(after name: String?, limit: Int) async throws -> [String] { try await inner.queueNames(after: name, limit: limit) }
    func scheduled(after cursor: TaskScheduleEntry?, through: Date, limit: Int) async throws -> [TaskScheduleEntry] {
        try await inner.scheduled(after: cursor, through: through, limit: limit)
    }
    func nextNotBefore(after date: Date) async throws -> Date? { try await inner.nextNotBefore(after: date) }
    func deadLetters(queueName: String?) async throws -> [StoredTask] { try await inner.deadLetters(queueName: queueName) }
    func replayDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await inner.replayDeadLetter(key: key, collection: collection)
    }
    func discardDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await inner.discardDeadLetter(key: key, collection: collection)
    }
    func lookup(key: String, collection: String) async throws -> TaskLookup? { try await inner.lookup(key: key, collection: collection) }
    func registerSchedules(_ schedules: [TaskScheduleState]) async throws { try await inner.registerSchedules(schedules) }
    func recordTick(schedule name: String, tick: Date, next: Date?, task: NewTask) async throws -> TaskTickRecord {
        try await inner.recordTick(schedule: name, tick: tick, next: next, task: task)
    }
    func schedules() async throws -> [TaskScheduleState] { try await inner.schedules() }
    func acquireStarts(bucket: String, limit: Int, period: Duration, count: Int, now: Date) async throws -> TaskRateGrant {
        try await inner.acquireStarts(bucket: bucket, limit: limit, period: period, count: count, now: now)
    }
    func releaseStarts(bucket: String, at: Date, count: Int) async throws { try await inner.releaseStarts(bucket: bucket, at: at, count: count) }
    func rateLimitUsage(now: Date) async throws -> [TaskRateUsage] { try await inner.rateLimitUsage(now: now) }
    func workers() async throws -> [TaskWorker] { try await inner.workers() }
    func setPaused(_ paused: Bool, queues queueNames: [String]) async throws -> [String] { try await inner.setPaused(paused, queues: queueNames) }
    func pausedQueues(among queueNames: [String]?) async throws -> Set<String> { try await inner.pausedQueues(among: queueNames) }
    func announceSpareCapacity(pool: String, room: Int) async throws {
        asks.add(1, ordering: .relaxed)
        try await inner.announceSpareCapacity(pool: pool, room: room)
    }
    func resume(queues queueNames: [String]) async throws -> [StoredTask] { try await inner.resume(queues: queueNames) }
    func purge(queue queueName: String) async throws -> Int { try await inner.purge(queue: queueName) }
    func snapshot() async throws -> [TaskQueueSnapshot] { try await inner.snapshot() }
    func changes() async throws -> AsyncStream<[TaskStorageChange]>? { try await inner.changes() }
    var isShared: Bool { inner.isShared }
    var leaseDuration: Duration? { inner.leaseDuration }
    func renew(_ leases: [TaskQueueLease], owner: String, leaseDuration: Duration) async throws -> [TaskQueueLease] {
        renewals.add(1, ordering: .relaxed)
        return try await inner.renew(leases, owner: owner, leaseDuration: leaseDuration)
    }
    func release(_ leases: [TaskQueueLease], owner: String) async throws {
        try await inner.release(leases, owner: owner)
    }
}

/// Plain parallel actions, counted as the queues' own storage calls are (a claim is one
/// statement and one commit, a finish one statement and one commit).
extension CountingStorage: ParallelTaskStorage {
    private var parallel: any ParallelTaskStorage {
        get throws {
            guard let parallel = inner as? any ParallelTaskStorage else {
                throw TaskBrokerError(code: .unsupported, message: "the counted storage stores no plain parallel actions")
            }
            return parallel
        }
    }

    func saveParallel(_ tasks: [NewTask]) async throws -> [StoredTask] { try await parallel.saveParallel(tasks) }
    func claimParallel(_ scope: TaskParallelScope, limit: Int, owner: String, leaseDuration: Duration, now: Date) async throws
        -> [TaskParallelClaim]
    {
        let start = monotonicNanoseconds()
        let claims = try await parallel.claimParallel(scope, limit: limit, owner: owner, leaseDuration: leaseDuration, now: now)
        claimNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed)
        self.claims.add(1, ordering: .relaxed)
        claimedHeads.add(claims.count, ordering: .relaxed)
        return claims
    }
    func finishParallel(_ outcomes: [TaskParallelOutcome], owner: String) async throws -> [TaskParallelClaim] {
        let start = monotonicNanoseconds()
        let refused = try await parallel.finishParallel(outcomes, owner: owner)
        finishNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed)
        finishes.add(1, ordering: .relaxed)
        finishedOutcomes.add(outcomes.count, ordering: .relaxed)
        fenced.add(refused.count, ordering: .relaxed)
        let total = applied.add(outcomes.count - refused.count, ordering: .relaxed).newValue
        if reportsProgress { emit("applied \(getpid()) \(total)") }
        return refused
    }
    func renewParallel(_ claims: [TaskParallelClaim], owner: String, leaseDuration: Duration) async throws -> [TaskParallelClaim] {
        renewals.add(1, ordering: .relaxed)
        return try await parallel.renewParallel(claims, owner: owner, leaseDuration: leaseDuration)
    }
    func releaseParallel(_ claims: [TaskParallelClaim], owner: String) async throws { try await parallel.releaseParallel(claims, owner: owner) }
    func nextParallelTime(_ scope: TaskParallelScope, owner: String, now: Date) async throws -> Date? {
        try await parallel.nextParallelTime(scope, owner: owner, now: now)
    }
    func parallelQueueNames() async throws -> [String] { try await parallel.parallelQueueNames() }
    func releaseHeldParallel(_ scope: TaskParallelScope) async throws { try await parallel.releaseHeldParallel(scope) }
    func parallelCounts() async throws -> [String: TaskParallelCounts] { try await parallel.parallelCounts() }
    func deleteParallel(key: String, collection: String) async throws -> StoredTask? { try await parallel.deleteParallel(key: key, collection: collection) }
    func lookupParallel(key: String, collection: String) async throws -> TaskLookup? { try await parallel.lookupParallel(key: key, collection: collection) }
    func parallelDeadLetters(queueName: String?) async throws -> [StoredTask] { try await parallel.parallelDeadLetters(queueName: queueName) }
    func replayParallelDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await parallel.replayParallelDeadLetter(key: key, collection: collection)
    }
    func discardParallelDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await parallel.discardParallelDeadLetter(key: key, collection: collection)
    }
}

/// Broker names kept across processes, as the wrapped storage keeps them.
extension CountingStorage: SharedBrokerNames {
    func registerBroker(name: String, claimsPrefix: Bool) async throws {
        try await (inner as? any SharedBrokerNames)?.registerBroker(name: name, claimsPrefix: claimsPrefix)
    }
    func unregisterBroker(name: String) async { await (inner as? any SharedBrokerNames)?.unregisterBroker(name: name) }
}

/// Reads that give the head alone of a queue another worker holds, counted as reads.
extension CountingStorage: LeaseAwareReads {
    func tasks(
        inQueues queueNames: [String], limit: Int, readingFor owner: String, claimBudget: Int, leaseDuration: Duration, now: Date
    ) async throws -> LeaseAwareRead {
        reads.add(1, ordering: .relaxed)
        let start = monotonicNanoseconds()
        defer { readNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed) }
        guard let leaseAware = inner as? any LeaseAwareReads else {
            return LeaseAwareRead(
                tasks: try await inner.tasks(inQueues: queueNames, after: [:], limit: limit), heldElsewhere: [:],
                paused: try await inner.pausedQueues(among: queueNames)
            )
        }
        // `TB_PG_NO_READ_CLAIMS=1`: reads take no lease (every head is claimed on its own), for A/B runs of one binary.
        let read = try await leaseAware.tasks(
            inQueues: queueNames, limit: limit, readingFor: owner, claimBudget: Self.readsClaim ? claimBudget : 0,
            leaseDuration: leaseDuration, now: now
        )
        firstReadQueues.add(queueNames.count, ordering: .relaxed)
        heldReadQueues.add(read.heldElsewhere.count, ordering: .relaxed)
        readClaimed.add(read.claimed.count, ordering: .relaxed)
        return read
    }
}

/// Held batches, counted as claims and their settlements as finishes.
extension CountingStorage: HeldParallelTaskStorage {
    func claimParallelHeld(_ scope: TaskParallelScope, limit: Int, owner: String, leaseDuration: Duration, now: Date) async throws
        -> (any TaskParallelHeldClaims)?
    {
        guard let held = try parallel as? any HeldParallelTaskStorage else { return nil }
        let start = monotonicNanoseconds()
        guard let batch = try await held.claimParallelHeld(scope, limit: limit, owner: owner, leaseDuration: leaseDuration, now: now) else {
            return nil
        }
        claimNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed)
        claims.add(1, ordering: .relaxed)
        claimedHeads.add(batch.claims.count, ordering: .relaxed)
        return CountedHeldClaims(inner: batch, counting: self)
    }
}

/// A held batch whose settlement counts as a finish.
struct CountedHeldClaims: TaskParallelHeldClaims {
    let inner: any TaskParallelHeldClaims
    let counting: CountingStorage

    var claims: [TaskParallelClaim] { inner.claims }

    func settle(_ outcomes: [TaskParallelOutcome]) async -> TaskParallelSettlement {
        let start = monotonicNanoseconds()
        let settlement = await inner.settle(outcomes)
        counting.finishNanoseconds.add(Int(monotonicNanoseconds() - start), ordering: .relaxed)
        counting.finishes.add(1, ordering: .relaxed)
        counting.finishedOutcomes.add(outcomes.count, ordering: .relaxed)
        let stored = settlement == .stored ? outcomes.count : 0
        counting.fenced.add(outcomes.count - stored, ordering: .relaxed)
        let total = counting.applied.add(stored, ordering: .relaxed).newValue
        if counting.reportsProgress { emit("applied \(getpid()) \(total)") }
        return settlement
    }

    func release() async { await inner.release() }
}

/// How many plain parallel actions a `parallel` worker runs at once (`TB_PG_PARALLEL`): 4,096, so
/// that two claims of the largest batch (1,024) run while earlier batches' outcomes are stored
/// (one run each: 512 gave 0.32 of the raw loop, 2,048 0.44, 4,096 0.49).
let parallelConcurrency = Int(ProcessInfo.processInfo.environment["TB_PG_PARALLEL"] ?? "") ?? 4096

/// User and system CPU time of this process so far.
func cpuMilliseconds() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000 + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000
}

/// Counts the actions it runs (more than were stored: some ran twice).
final class CountingNoOpHandler: AsyncTaskQueueHandler {
    let handled = Atomic<Int>(0)

    func handle(_ action: NoOpAction, context _: TaskContext) async -> TaskResult {
        handled.add(1, ordering: .relaxed)
        return .success
    }
}

/// Prints each start: `started KEY MONOTONIC_NS`.
final class AnnouncingHandler: AsyncTaskQueueHandler {
    func handle(_ action: NoOpAction, context _: TaskContext) async -> TaskResult {
        emit("started \(action.key) \(monotonicNanoseconds())")
        return .success
    }
}

/// Prints each start with its attempt and this process's pid, then holds the queue for 60 s.
final class HoldingHandler: AsyncTaskQueueHandler {
    func handle(_ action: NoOpAction, context: TaskContext) async -> TaskResult {
        emit("started \(action.key) \(context.attempt) \(getpid()) \(monotonicNanoseconds())")
        try? await Task.sleep(for: .seconds(60))
        return .success
    }
}

/// The burn-down workers' `maxConcurrentQueues` (`TB_PG_CONCURRENCY` overrides it, for profiling).
/// 512 of the 1,000 queues: since a finish claims each queue's next head, the more queues in flight,
/// the larger each finish (one statement, one commit); 128 gave ~21,000 actions/s, 512 ~31,000,
/// 1,024 no more than 512 (one process, same session).
let burnConcurrency = Int(ProcessInfo.processInfo.environment["TB_PG_CONCURRENCY"] ?? "") ?? 512

/// Runs on the main actor: its blocking `readLine()` then holds the main thread, not one of the
/// cooperative pool's threads that the broker runs on.
@MainActor
func runPostgresWorker(_ arguments: [String]) async throws {
    guard arguments.count >= 3 else {
        throw TaskBrokerError(code: .invalidConfiguration, message: "usage: pg-worker MODE URL SCHEMA [LEASE_MS]")
    }
    let mode = arguments[0]
    var configuration = try TaskDatabase.PostgresConfiguration(url: arguments[1])
    configuration.schema = arguments[2]
    if arguments.count > 3, let milliseconds = Int64(arguments[3]) {
        configuration.leaseDuration = .milliseconds(milliseconds)
    }
    let postgres = try await TaskDatabase.postgres(configuration: configuration)
    let counting = CountingStorage(postgres.storage, reportsProgress: mode == "burn" || mode == "parallel")
    let database = TaskDatabase(storage: counting)
    let pid = getpid()
    let counter = CountingNoOpHandler()
    let broker: TaskQueueBroker
    switch mode {
    case "burn":
        broker = try await TaskQueueBroker.setup(
            database: database, name: "bench", handler: counter,
            configuration: .init(maxConcurrentQueues: burnConcurrency, startsAutomatically: false)
        )
        emit("ready \(pid)")
        guard readLine() == "go" else { break }
        broker.start()
    case "parallel":
        var parallelConfiguration = TaskQueueBroker.Configuration(startsAutomatically: false)
        parallelConfiguration.maxConcurrentParallelActions = parallelConcurrency
        broker = try await TaskQueueBroker.setup(database: database, name: "bench", handler: counter, configuration: parallelConfiguration)
        emit("ready \(pid)")
        guard readLine() == "go" else { break }
        broker.start()
    case "latency":
        broker = try await TaskQueueBroker.setup(database: database, name: "bench", handler: AnnouncingHandler())
        emit("ready \(pid)")
    case "takeover":
        broker = try await TaskQueueBroker.setup(
            database: database, name: "bench", handler: HoldingHandler(), configuration: .init(shutdownTimeout: .seconds(1))
        )
        emit("ready \(pid)")
    default:
        throw TaskBrokerError(code: .invalidConfiguration, message: "unknown pg-worker mode \(mode)")
    }
    while readLine() != nil {}
    await broker.shutdown()
    emit("stats \(pid) \(counting.summary) handled=\(counter.handled.load(ordering: .relaxed))")
}
