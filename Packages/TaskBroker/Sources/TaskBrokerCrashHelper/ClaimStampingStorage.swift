#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import TaskBroker

/// The PostgreSQL crash test's worker storage: the worker's own backend (every call forwarded, so
/// that its broker is a user's), with each claim stamped in the worker's log. "C <key> <pid> <ns>"
/// for every head before the claim is sent, then "G …" for a head granted or "N …" for one not
/// granted (reads that take leases: see the `LeaseAwareReads` conformance below). A worker killed
/// after a claim of the action its dead predecessor ran, and before that action started, held the
/// queue's lease in its turn: the test measures the takeover from that second kill, not the first
/// (see `PostgresCrashTests`).
struct ClaimStampingStorage: TaskStorage {
    let base: any TaskStorage
    let log: StampLog
    let pid = getpid()

    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [TaskClaimResult] {
        for head in heads {
            log.append("C \(head.key) \(pid) \(monotonicNanoseconds())")
        }
        let results = try await base.claim(heads, owner: owner, leaseDuration: leaseDuration)
        let time = monotonicNanoseconds()
        for (head, result) in zip(heads, results) {
            log.append("\(result.grantedEpoch != nil ? "G" : "N") \(head.key) \(pid) \(time)")
        }
        return results
    }

    // Everything else as the backend does it.

    func save(_ tasks: [NewTask]) async throws -> [StoredTask] {
        try await base.save(tasks)
    }

    func delete(key: String, collection: String) async throws -> StoredTask? {
        try await base.delete(key: key, collection: collection)
    }

    func queueNames() async throws -> [String] {
        try await base.queueNames()
    }

    func queueNames(after name: String?, limit: Int) async throws -> [String] {
        try await base.queueNames(after: name, limit: limit)
    }

    func tasks(inQueue queueName: String) async throws -> [StoredTask] {
        try await base.tasks(inQueue: queueName)
    }

    func tasks(inQueues queueNames: [String]) async throws -> [String: [StoredTask]] {
        try await base.tasks(inQueues: queueNames)
    }

    func tasks(inQueues queueNames: [String], after positions: [String: Int64], limit: Int) async throws -> [String: [StoredTask]] {
        try await base.tasks(inQueues: queueNames, after: positions, limit: limit)
    }

    func finish(_ outcomes: [TaskOutcome], owner: String) async throws -> TaskFinishReport {
        try await base.finish(outcomes, owner: owner)
    }

    func finish(
        _ outcomes: [TaskOutcome], claimingNext nextHeads: [String: StoredTask], owner: String, leaseDuration: Duration
    ) async throws -> TaskFinishReport {
        try await base.finish(outcomes, claimingNext: nextHeads, owner: owner, leaseDuration: leaseDuration)
    }

    func resume(queues queueNames: [String]) async throws -> [StoredTask] {
        try await base.resume(queues: queueNames)
    }

    func purge(queue queueName: String) async throws -> Int {
        try await base.purge(queue: queueName)
    }

    func snapshot() async throws -> [TaskQueueSnapshot] {
        try await base.snapshot()
    }

    func changes() async throws -> AsyncStream<[TaskStorageChange]>? {
        try await base.changes()
    }

    var isShared: Bool { base.isShared }

    var leaseDuration: Duration? { base.leaseDuration }

    func renew(_ leases: [TaskQueueLease], owner: String, leaseDuration: Duration) async throws -> [TaskQueueLease] {
        try await base.renew(leases, owner: owner, leaseDuration: leaseDuration)
    }

    func release(_ leases: [TaskQueueLease], owner: String) async throws {
        try await base.release(leases, owner: owner)
    }

    func announceSpareCapacity(pool: String, room: Int) async throws {
        try await base.announceSpareCapacity(pool: pool, room: room)
    }

    func saveIfAbsent(_ task: NewTask) async throws -> StoredTask? {
        try await base.saveIfAbsent(task)
    }

    func scheduled(after cursor: TaskScheduleEntry?, through: Date, limit: Int) async throws -> [TaskScheduleEntry] {
        try await base.scheduled(after: cursor, through: through, limit: limit)
    }

    func nextNotBefore(after date: Date) async throws -> Date? {
        try await base.nextNotBefore(after: date)
    }

    func deadLetters(queueName: String?) async throws -> [StoredTask] {
        try await base.deadLetters(queueName: queueName)
    }

    func replayDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await base.replayDeadLetter(key: key, collection: collection)
    }

    func discardDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await base.discardDeadLetter(key: key, collection: collection)
    }

    func lookup(key: String, collection: String) async throws -> TaskLookup? {
        try await base.lookup(key: key, collection: collection)
    }

    func registerSchedules(_ schedules: [TaskScheduleState]) async throws {
        try await base.registerSchedules(schedules)
    }

    func recordTick(schedule name: String, tick: Date, next: Date?, task: NewTask) async throws -> TaskTickRecord {
        try await base.recordTick(schedule: name, tick: tick, next: next, task: task)
    }

    func schedules() async throws -> [TaskScheduleState] {
        try await base.schedules()
    }

    func acquireStarts(bucket: String, limit: Int, period: Duration, count: Int, now: Date) async throws -> TaskRateGrant {
        try await base.acquireStarts(bucket: bucket, limit: limit, period: period, count: count, now: now)
    }

    func releaseStarts(bucket: String, at: Date, count: Int) async throws {
        try await base.releaseStarts(bucket: bucket, at: at, count: count)
    }

    func rateLimitUsage(now: Date) async throws -> [TaskRateUsage] {
        try await base.rateLimitUsage(now: now)
    }

    func workers() async throws -> [TaskWorker] {
        try await base.workers()
    }

    func setPaused(_ paused: Bool, queues queueNames: [String]) async throws -> [String] {
        try await base.setPaused(paused, queues: queueNames)
    }

    func pausedQueues(among queueNames: [String]?) async throws -> Set<String> {
        try await base.pausedQueues(among: queueNames)
    }
}

/// Broker names as the backend keeps them: the crash test's workers are refused, and refuse,
/// overlapping names as any worker does.
extension ClaimStampingStorage: SharedBrokerNames {
    func registerBroker(name: String, claimsPrefix: Bool) async throws {
        try await (base as? any SharedBrokerNames)?.registerBroker(name: name, claimsPrefix: claimsPrefix)
    }

    func unregisterBroker(name: String) async {
        await (base as? any SharedBrokerNames)?.unregisterBroker(name: name)
    }
}

/// Reads as the backend does them, the head alone of a queue another worker holds, and leases
/// taken by reads stamped as claims: "C" for each queue's head (read just before, in a read of
/// its own) before a read that may take leases is sent, then "G" for each head whose lease the
/// read took and "N" for the others. A worker killed after its read took a queue's lease, and
/// before the head started, held that lease in its turn, as after a granted claim.
extension ClaimStampingStorage: LeaseAwareReads {
    func tasks(
        inQueues queueNames: [String], limit: Int, readingFor owner: String, claimBudget: Int, leaseDuration: Duration, now: Date
    ) async throws -> LeaseAwareRead {
        guard let reads = base as? any LeaseAwareReads else {
            return LeaseAwareRead(
                tasks: try await base.tasks(inQueues: queueNames, after: [:], limit: limit), heldElsewhere: [:],
                paused: try await base.pausedQueues(among: queueNames)
            )
        }
        var heads: [String: String] = [:]
        if claimBudget > 0 {
            for (queueName, tasks) in try await base.tasks(inQueues: queueNames, after: [:], limit: 1) {
                guard let head = tasks.first else { continue }
                heads[queueName] = head.key
                log.append("C \(head.key) \(pid) \(monotonicNanoseconds())")
            }
        }
        let read = try await reads.tasks(
            inQueues: queueNames, limit: limit, readingFor: owner, claimBudget: claimBudget, leaseDuration: leaseDuration, now: now
        )
        let time = monotonicNanoseconds()
        for (queueName, key) in heads.sorted(by: { $0.key < $1.key }) {
            let taken = read.claimed[queueName] != nil && read.tasks[queueName]?.first?.key == key
            log.append("\(taken ? "G" : "N") \(key) \(pid) \(time)")
        }
        // A lease taken for a head that changed after the look before the read: stamped now.
        for queueName in read.claimed.keys.sorted() {
            guard let key = read.tasks[queueName]?.first?.key, key != heads[queueName] else { continue }
            log.append("C \(key) \(pid) \(time)")
            log.append("G \(key) \(pid) \(time)")
        }
        return read
    }
}
