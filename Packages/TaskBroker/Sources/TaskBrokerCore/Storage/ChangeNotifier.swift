import Synchronization

/// A change made through a ``TaskDatabase``, delivered to its brokers after the commit.
package enum TaskChange: Sendable {
    case saved(StoredTask)
    case deleted(StoredTask)
    /// An action completed (reported by a shared backend's change feed).
    case completed(StoredTask)
    case resumed(queueNames: [String], tasks: [StoredTask])
    case purged(queueName: String)
    /// Another process changed these queues (seen through the SQLite file's change journal or a
    /// shared backend's change feed).
    case external(queueNames: [String])
    /// Another process changed queues that this process could not learn of one by one (the
    /// SQLite change journal was pruned past what it had read): every queue a broker holds may
    /// have changed, and these are the stored ones.
    case externalEverywhere(storedQueues: [String])
    /// The broker that owned these queues in this process stopped: another may take them.
    case unowned(queueNames: [String])
    /// A worker of the pool of this name in another process has room for `room` more queues.
    case spareCapacity(pool: String, room: Int)
    /// Plain parallel actions of these queues were saved or made ready (``ParallelTaskStorage``).
    case parallelReady(queueNames: [String])
    /// A process committed to the SQLite file changes its change journal does not name (runs
    /// completing): nothing a broker acts on, but what a console shows changed.
    case touched
}

extension TaskChange {
    /// What a shared backend's change means to the brokers.
    static func changes(from change: TaskStorageChange) -> [TaskChange] {
        switch change {
        case .queuesChanged(let queueNames): [.external(queueNames: queueNames)]
        case .queuesResumed(let queueNames): [.resumed(queueNames: queueNames, tasks: [])]
        case .completed(let tasks): tasks.map { .completed($0) }
        case .spareCapacity(let pool, let room): [.spareCapacity(pool: pool, room: room)]
        case .parallelReady(let queueNames): [.parallelReady(queueNames: queueNames)]
        }
    }
}

/// Delivers committed changes to the brokers of one database.
package final class ChangeNotifier: Sendable {
    private let listeners = Mutex<[UInt64: @Sendable ([TaskChange]) -> Void]>([:])
    private let nextID = Atomic<UInt64>(0)

    package func add(_ listener: @escaping @Sendable ([TaskChange]) -> Void) -> UInt64 {
        let id = nextID.add(1, ordering: .relaxed).newValue
        listeners.withLock { $0[id] = listener }
        return id
    }

    package func remove(_ id: UInt64) {
        _ = listeners.withLock { $0.removeValue(forKey: id) }
    }

    package func notify(_ changes: [TaskChange]) {
        guard !changes.isEmpty else { return }
        let current = listeners.withLock { Array($0.values) }
        for listener in current {
            listener(changes)
        }
    }
}
