import AsyncPrimitivesTesting
import Foundation
import Synchronization
import TaskBroker
@testable import TaskBrokerCore

/// A backend that forwards to another one but fails the first calls of the operations it is told
/// to, with the error a real backend throws: a storage fault injected N times, then gone.
final class FlakyStorage: TaskStorage {
    let base: any TaskStorage
    private let failuresLeft: Mutex<[TaskStorageOperation: Int]>
    private let callCounts = Mutex<[TaskStorageOperation: Int]>([:])

    init(_ base: any TaskStorage, failing failures: [TaskStorageOperation: Int]) {
        self.base = base
        self.failuresLeft = Mutex(failures)
    }

    /// How many times an operation was called, failed calls included.
    func calls(_ operation: TaskStorageOperation) -> Int {
        callCounts.withLock { $0[operation, default: 0] }
    }

    private func call(_ operation: TaskStorageOperation) throws {
        let fails = callCounts.withLock { counts in
            counts[operation, default: 0] += 1
            return failuresLeft.withLock { left in
                guard let count = left[operation], count > 0 else { return false }
                left[operation] = count - 1
                return true
            }
        }
        if fails {
            throw TaskBrokerError(code: .storageFailed, message: "injected \(operation) failure")
        }
    }

    func tasks(inQueue queueName: String) async throws -> [StoredTask] {
        try call(.load)
        return try await base.tasks(inQueue: queueName)
    }

    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [TaskClaimResult] {
        try call(.claim)
        return try await base.claim(heads, owner: owner, leaseDuration: leaseDuration)
    }

    func finish(_ outcomes: [TaskOutcome], owner: String) async throws -> TaskFinishReport {
        try call(.store)
        return try await base.finish(outcomes, owner: owner)
    }

    func finish(
        _ outcomes: [TaskOutcome], claimingNext nextHeads: [String: StoredTask], owner: String, leaseDuration: Duration
    ) async throws -> TaskFinishReport {
        try call(.store)
        return try await base.finish(outcomes, claimingNext: nextHeads, owner: owner, leaseDuration: leaseDuration)
    }

    func save(_ tasks: [NewTask]) async throws -> [StoredTask] { try await base.save(tasks) }
    func delete(key: String, collection: String) async throws -> StoredTask? { try await base.delete(key: key, collection: collection) }
    func queueNames() async throws -> [String] { try await base.queueNames() }
    func resume(queues queueNames: [String]) async throws -> [StoredTask] { try await base.resume(queues: queueNames) }
    func purge(queue queueName: String) async throws -> Int { try await base.purge(queue: queueName) }
    func snapshot() async throws -> [TaskQueueSnapshot] { try await base.snapshot() }

    /// Ticks to fail before recording one (schedules have no `TaskStorageOperation`).
    let tickFailuresLeft = Mutex(0)
    /// Plain parallel action calls to fail, by name (see the `ParallelTaskStorage` extension).
    let parallelFailuresLeft = Mutex<[String: Int]>([:])
    /// How many held claims answer `nil` (the lane then claims with leases), when the base holds batches.
    let heldClaimsRefused = Mutex(0)
    /// Whether an ordinary store of plain parallel outcomes waits until a held batch was settled.
    let finishWaitsForASettlement = Mutex(false)
    /// Opened when an ordinary store starts waiting for a settlement.
    let finishWaiting = Latch()
    /// Opened when a held batch's settlement returned.
    let settled = Latch()

    func registerSchedules(_ schedules: [TaskScheduleState]) async throws { try await base.registerSchedules(schedules) }
    func schedules() async throws -> [TaskScheduleState] { try await base.schedules() }
    func recordTick(schedule name: String, tick: Date, next: Date?, task: NewTask) async throws -> TaskTickRecord {
        let fails = tickFailuresLeft.withLock { left in
            defer { left = max(0, left - 1) }
            return left > 0
        }
        if fails { throw TaskBrokerError(code: .storageFailed, message: "injected tick failure") }
        if holdsNextTick.withLock({ holds in defer { holds = false }; return holds }) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                heldTick.withLock { $0 = continuation }
                ticksHeld.record(tick)
            }
        }
        return try await base.recordTick(schedule: name, tick: tick, next: next, task: task)
    }

    /// Whether the next tick's recording waits (before it reaches the base backend) until
    /// ``releaseHeldTick()``; ``ticksHeld`` records the tick once it waits.
    let holdsNextTick = Mutex(false)
    let ticksHeld = EventCollector<Date>()
    private let heldTick = Mutex<CheckedContinuation<Void, Never>?>(nil)

    /// Lets the held tick's recording go on (call it once ``ticksHeld`` has recorded the tick).
    func releaseHeldTick() {
        heldTick.withLock { held in defer { held = nil }; return held }?.resume()
    }
}

/// Holds each action until the test releases it, and gives up when its task is cancelled: the
/// handler a well-behaved `async` handler is.
final class CancellableGateHandler: AsyncTaskQueueHandler {
    let started = EventCollector<String>()
    let cancelled = EventCollector<String>()
    private let gates = Mutex<(open: Set<String>, waiting: [String: CheckedContinuation<Void, Never>])>(([], [:]))
    /// Keys whose handler ignores cancellation and waits for `release` regardless.
    let stubborn: Set<String>

    init(stubborn: Set<String> = []) {
        self.stubborn = stubborn
    }

    func handle(_ action: TestAction, context _: TaskContext) async -> TaskResult {
        let key = action.key
        started.record(key)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let isOpen = gates.withLock { gates -> Bool in
                    if gates.open.contains(key) { return true }
                    gates.waiting[key] = continuation
                    return false
                }
                if isOpen { continuation.resume() }
            }
        } onCancel: {
            cancelled.record(key)
            if !stubborn.contains(key) { release(key) }
        }
        return Task.isCancelled ? .retry(after: .zero) : .success
    }

    func release(_ key: String) {
        let waiting = gates.withLock { gates -> CheckedContinuation<Void, Never>? in
            gates.open.insert(key)
            return gates.waiting.removeValue(forKey: key)
        }
        waiting?.resume()
    }
}

/// Plain parallel actions, forwarded to a base that stores them, with faults injected by name
/// (`"nextTime"`, `"releaseHeld"`, `"claim"`, `"finish"`) as many times as `parallelFailuresLeft` says.
extension FlakyStorage: ParallelTaskStorage {
    private var parallel: any ParallelTaskStorage {
        get throws {
            guard let parallel = base as? any ParallelTaskStorage else {
                throw TaskBrokerError(code: .unsupported, message: "the base stores no plain parallel actions")
            }
            return parallel
        }
    }

    func fault(_ name: String) throws {
        let fails = parallelFailuresLeft.withLock { left in
            guard let count = left[name], count > 0 else { return false }
            left[name] = count - 1
            return true
        }
        if fails { throw TaskBrokerError(code: .storageFailed, message: "injected \(name) failure") }
    }

    func saveParallel(_ tasks: [NewTask]) async throws -> [StoredTask] { try await parallel.saveParallel(tasks) }
    func claimParallel(_ scope: TaskParallelScope, limit: Int, owner: String, leaseDuration: Duration, now: Date) async throws
        -> [TaskParallelClaim]
    {
        try fault("claim")
        return try await parallel.claimParallel(scope, limit: limit, owner: owner, leaseDuration: leaseDuration, now: now)
    }
    func finishParallel(_ outcomes: [TaskParallelOutcome], owner: String) async throws -> [TaskParallelClaim] {
        try fault("finish")
        if finishWaitsForASettlement.withLock({ $0 }) {
            finishWaiting.open()
            // Cancelled (a broker given up on): the wait ends, so that nothing hangs.
            await withTaskCancellationHandler { await settled.wait() } onCancel: { settled.open() }
        }
        return try await parallel.finishParallel(outcomes, owner: owner)
    }
    func renewParallel(_ claims: [TaskParallelClaim], owner: String, leaseDuration: Duration) async throws -> [TaskParallelClaim] {
        try await parallel.renewParallel(claims, owner: owner, leaseDuration: leaseDuration)
    }
    func releaseParallel(_ claims: [TaskParallelClaim], owner: String) async throws { try await parallel.releaseParallel(claims, owner: owner) }
    func nextParallelTime(_ scope: TaskParallelScope, owner: String, now: Date) async throws -> Date? {
        try fault("nextTime")
        return try await parallel.nextParallelTime(scope, owner: owner, now: now)
    }
    func parallelQueueNames() async throws -> [String] { try await parallel.parallelQueueNames() }
    func releaseHeldParallel(_ scope: TaskParallelScope) async throws {
        try fault("releaseHeld")
        try await parallel.releaseHeldParallel(scope)
    }
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

/// Held batches, when the base holds them (see `heldClaimsRefused`, `settled`).
extension FlakyStorage: HeldParallelTaskStorage {
    func claimParallelHeld(_ scope: TaskParallelScope, limit: Int, owner: String, leaseDuration: Duration, now: Date) async throws
        -> (any TaskParallelHeldClaims)?
    {
        guard let held = base as? any HeldParallelTaskStorage else { return nil }
        try fault("claim")
        let refused = heldClaimsRefused.withLock { left in
            defer { left = max(0, left - 1) }
            return left > 0
        }
        if refused { return nil }
        return try await held.claimParallelHeld(scope, limit: limit, owner: owner, leaseDuration: leaseDuration, now: now)
            .map { SettlementSignalling(base: $0, settled: settled) }
    }

    /// A held batch that opens `settled` once its settlement returned.
    struct SettlementSignalling: TaskParallelHeldClaims {
        let base: any TaskParallelHeldClaims
        let settled: Latch

        var claims: [TaskParallelClaim] { base.claims }

        func settle(_ outcomes: [TaskParallelOutcome]) async -> TaskParallelSettlement {
            let settlement = await base.settle(outcomes)
            settled.open()
            return settlement
        }

        func release() async { await base.release() }
    }
}

extension TaskBrokerEvent {
    var isStorageFailure: Bool {
        if case .storageFailed = self { return true }
        return false
    }

    func isStorageFailure(_ operation: TaskStorageOperation) -> Bool {
        if case .storageFailed(let failed, _, _, _) = self { return failed == operation }
        return false
    }
}
