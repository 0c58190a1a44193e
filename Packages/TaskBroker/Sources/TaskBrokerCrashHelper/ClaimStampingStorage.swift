#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import TaskBroker

/// The PostgreSQL crash test's worker storage: the worker's own backend, with each claim stamped in
/// the worker's log. "C <key> <pid> <ns>" for every head before the claim is sent, then "G …" for a
/// head granted or "N …" for one not granted. A worker killed after a claim of the action its dead
/// predecessor ran, and before that action started, held the queue's lease in its turn: the test
/// measures the takeover from that second kill, not the first (see `PostgresCrashTests`).
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
