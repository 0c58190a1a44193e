import Synchronization

/// A change made through a ``TaskDatabase``, delivered to its brokers after the commit.
enum TaskChange: Sendable {
    case saved(StoredTask)
    case deleted(StoredTask)
    case resumed(queueNames: [String], tasks: [StoredTask])
    case purged(queueName: String)
    /// Another process changed these queues (seen through the SQLite file's change journal).
    case external(queueNames: [String])
}

/// Delivers committed changes to the brokers of one database.
final class ChangeNotifier: Sendable {
    private let listeners = Mutex<[UInt64: @Sendable ([TaskChange]) -> Void]>([:])
    private let nextID = Atomic<UInt64>(0)

    func add(_ listener: @escaping @Sendable ([TaskChange]) -> Void) -> UInt64 {
        let id = nextID.add(1, ordering: .relaxed).newValue
        listeners.withLock { $0[id] = listener }
        return id
    }

    func remove(_ id: UInt64) {
        _ = listeners.withLock { $0.removeValue(forKey: id) }
    }

    func notify(_ changes: [TaskChange]) {
        guard !changes.isEmpty else { return }
        let current = listeners.withLock { Array($0.values) }
        for listener in current {
            listener(changes)
        }
    }
}
