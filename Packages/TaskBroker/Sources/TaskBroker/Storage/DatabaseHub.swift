import Foundation
import Synchronization

/// What the `TaskDatabase`s of one process that share a file also share: the brokers' claims, the
/// change notifications, the locks that keep brokers of other processes off this process's queues,
/// and the watcher that sees other processes' changes.
final class DatabaseHub: Sendable {
    let notifier = ChangeNotifier()
    let registry = ClaimRegistry()
    /// The cross-process broker locks of an SQLite file (`nil` for other backends).
    let locks: SQLiteBrokerLocks?
    private let watcher = Mutex<(users: Int, watcher: ExternalChangeWatcher?)>((0, nil))

    private static let byPath = Mutex<[String: DatabaseHub]>([:])

    init(path: String? = nil) {
        locks = path.map(SQLiteBrokerLocks.init(databasePath:))
    }

    /// The hub of a database file, the same for every `TaskDatabase` opened on it in this process.
    static func shared(forPath path: String) -> DatabaseHub {
        let key = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        return byPath.withLock { hubs in
            if let hub = hubs[key] { return hub }
            let hub = DatabaseHub(path: key)
            hubs[key] = hub
            return hub
        }
    }

    /// Delivers committed changes to this process's brokers and signals the commit to the brokers
    /// of other processes that share the file.
    func publish(_ changes: [TaskChange]) {
        guard !changes.isEmpty else { return }
        locks?.signal()
        notifier.notify(changes)
    }

    /// Starts watching for other processes' changes (once for all brokers of the file): from now on
    /// a change another process commits after journal entry `head` is delivered to the notifier's
    /// listeners.
    func retainWatcher(_ storage: SQLiteTaskStorage, head: Int64) {
        watcher.withLock { state in
            if state.watcher == nil, let locks {
                state.watcher = ExternalChangeWatcher(storage: storage, head: head, signalFile: locks.path, notifier: notifier)
            }
            state.users += 1
        }
    }

    /// Stops watching once no broker needs it.
    func releaseWatcher() {
        let stopped = watcher.withLock { state -> ExternalChangeWatcher? in
            state.users -= 1
            guard state.users == 0 else { return nil }
            defer { state.watcher = nil }
            return state.watcher
        }
        stopped?.cancel()
    }
}
