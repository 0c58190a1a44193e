import AsyncPrimitivesTesting
import Foundation
import Synchronization
import TaskBroker

/// A backend that forwards to another one but holds every read of the given queues' actions
/// (`tasks(inQueue:)`) until the test opens the gate: a test can then commit saves while a
/// broker's load of those queues is under way, in a fixed order instead of by racing.
final class GatedStorage: TaskStorage {
    let base: any TaskStorage
    let heldQueues: Set<String>
    /// Whether `queueNames()` is held too, once it has listed the stored queues.
    let holdsQueueNames: Bool
    /// Records the queue name each time a held read starts waiting (`"queueNames()"` for a held
    /// listing of the queues).
    let readsWaiting = EventCollector<String>()
    private let gate = Mutex<(isOpen: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    init(_ base: any TaskStorage, holdingReadsOf queueNames: Set<String>, holdingQueueNames: Bool = false) {
        self.base = base
        self.heldQueues = queueNames
        self.holdsQueueNames = holdingQueueNames
    }

    /// Lets every held read (and every later one) through.
    func open() {
        let waiting = gate.withLock { gate -> [CheckedContinuation<Void, Never>] in
            gate.isOpen = true
            defer { gate.waiting = [] }
            return gate.waiting
        }
        for continuation in waiting {
            continuation.resume()
        }
    }

    func tasks(inQueue queueName: String) async throws -> [StoredTask] {
        if heldQueues.contains(queueName) {
            await wait(recording: queueName)
        }
        return try await base.tasks(inQueue: queueName)
    }

    /// Waits until the gate opens; records `read` if it had to wait.
    private func wait(recording read: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = gate.withLock { gate -> Bool in
                if !gate.isOpen { gate.waiting.append(continuation) }
                return gate.isOpen
            }
            if isOpen {
                continuation.resume()
            } else {
                readsWaiting.record(read)
            }
        }
    }

    func save(_ tasks: [NewTask]) async throws -> [StoredTask] { try await base.save(tasks) }
    func delete(key: String, collection: String) async throws -> StoredTask? { try await base.delete(key: key, collection: collection) }
    func queueNames() async throws -> [String] {
        let names = try await base.queueNames()
        if holdsQueueNames { await wait(recording: "queueNames()") }
        return names
    }
    func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [TaskClaimResult] {
        try await base.claim(heads, owner: owner, leaseDuration: leaseDuration)
    }
    func finish(_ outcomes: [TaskOutcome], owner: String) async throws -> TaskFinishReport { try await base.finish(outcomes, owner: owner) }
    func finish(
        _ outcomes: [TaskOutcome], claimingNext nextHeads: [String: StoredTask], owner: String, leaseDuration: Duration
    ) async throws -> TaskFinishReport {
        try await base.finish(outcomes, claimingNext: nextHeads, owner: owner, leaseDuration: leaseDuration)
    }
    func resume(queues queueNames: [String]) async throws -> [StoredTask] { try await base.resume(queues: queueNames) }
    func purge(queue queueName: String) async throws -> Int { try await base.purge(queue: queueName) }
    func snapshot() async throws -> [TaskQueueSnapshot] { try await base.snapshot() }
}
