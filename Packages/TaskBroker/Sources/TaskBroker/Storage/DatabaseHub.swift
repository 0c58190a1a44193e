import Dispatch
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
    /// The change feed of a shared backend: how many brokers use it, and the task that starts it
    /// (its value is the task that delivers the feed to the notifier).
    private let feed = Mutex<(users: Int, start: Task<Task<Void, Never>, any Error>?)>((0, nil))

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

    /// When the last completion signal was written (`nil`: none yet), and whether one is due.
    private let completionSignal = Mutex<(last: ContinuousClock.Instant?, scheduled: Bool)>((nil, false))
    /// The shortest time between two completion signals of this process.
    static let completionSignalInterval: Duration = .milliseconds(50)

    /// Tells other processes' watchers that runs completed (outcomes stored: the change journal
    /// does not name them), so that a console's counts (`TaskDatabase.queueChanges()`) follow a
    /// worker. At most one signal per ``completionSignalInterval``: a busy worker stores thousands
    /// of outcomes a second, and each signal wakes every watcher of the file; the last completion
    /// of a burst is still signalled, at most that interval later.
    func signalCompletions() {
        guard let locks else { return }
        let now = ContinuousClock.now
        let wait = completionSignal.withLock { state -> Duration? in
            if state.scheduled { return nil }
            if let last = state.last, last.duration(to: now) < Self.completionSignalInterval {
                state.scheduled = true
                return Self.completionSignalInterval - last.duration(to: now)
            }
            state.last = now
            return .zero
        }
        guard let wait else { return }
        guard wait > .zero else { return locks.signal() }
        let nanoseconds = UInt64(max(0, wait.components.seconds * 1_000_000_000 + wait.components.attoseconds / 1_000_000_000))
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [self] in
            completionSignal.withLock { state in
                state.scheduled = false
                state.last = ContinuousClock.now
            }
            locks.signal()
        }
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

    /// Starts delivering a shared backend's change feed to this process's brokers (once for all
    /// of them); returns when the backend listens.
    ///
    /// - Throws: What the backend throws when it cannot listen; nothing is retained then.
    func retainFeed(_ storage: any TaskStorage) async throws {
        let notifier = self.notifier
        let start = feed.withLock { state in
            state.users += 1
            if let start = state.start { return start }
            let start = Task { () throws -> Task<Void, Never> in
                guard let stream = try await storage.changes() else { return Task {} }
                return Task {
                    for await batch in stream {
                        notifier.notify(batch.flatMap(TaskChange.changes(from:)))
                    }
                }
            }
            state.start = start
            return start
        }
        do {
            _ = try await start.value
        } catch {
            feed.withLock { state in
                state.users -= 1
                if state.start == start { state.start = nil }
            }
            throw error
        }
    }

    /// Stops delivering the change feed once no broker needs it.
    func releaseFeed() {
        let stopped = feed.withLock { state -> Task<Task<Void, Never>, any Error>? in
            state.users -= 1
            guard state.users == 0 else { return nil }
            defer { state.start = nil }
            return state.start
        }
        guard let stopped else { return }
        Task { try? await stopped.value.cancel() }
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
