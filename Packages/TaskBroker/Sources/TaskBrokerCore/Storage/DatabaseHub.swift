import AsyncPrimitives
import Dispatch
import Foundation
import Synchronization

/// What the `TaskDatabase`s of one process that share a store also share: the brokers' claims, the
/// change notifications, the signal that tells other processes of a commit and the watcher that
/// sees theirs (``MachineLocalStorage``), or the change feed (a shared backend).
package final class DatabaseHub: Sendable {
    package let notifier = ChangeNotifier()
    let registry = ClaimRegistry()
    /// How other processes of the machine learn of this process's commits (`nil`: they do not
    /// need to, or the backend's change feed tells them).
    private let commitSignal: (any CommitSignal)?
    private let watcher = Mutex<(users: Int, watcher: (any ExternalChangeWatching)?)>((0, nil))
    /// The change feed of a shared backend: how many brokers use it, and the task that delivers it
    /// to the notifier with the answer of its start.
    private let feed = Mutex<(users: Int, delivery: (task: Task<Void, Never>, started: Deferred<Result<Void, any Error>>)?)>((0, nil))

    /// Creates a hub.
    ///
    /// - Parameter commitSignal: How other processes of the machine learn of this process's commits.
    package init(commitSignal: (any CommitSignal)? = nil) {
        self.commitSignal = commitSignal
    }

    /// Delivers committed changes to this process's brokers and signals the commit to the brokers
    /// of other processes that share the file.
    package func publish(_ changes: [TaskChange]) {
        guard !changes.isEmpty else { return }
        commitSignal?.signal()
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
    package func signalCompletions() {
        guard let commitSignal else { return }
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
        guard wait > .zero else { return commitSignal.signal() }
        let nanoseconds = UInt64(max(0, wait.components.seconds * 1_000_000_000 + wait.components.attoseconds / 1_000_000_000))
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [self] in
            completionSignal.withLock { state in
                state.scheduled = false
                state.last = ContinuousClock.now
            }
            commitSignal.signal()
        }
    }

    /// Starts watching for other processes' changes, once for all users of the store: `start`
    /// makes the watcher if none runs (it delivers what it sees to ``notifier``).
    package func retainWatcher(_ start: () -> any ExternalChangeWatching) {
        watcher.withLock { state in
            if state.watcher == nil { state.watcher = start() }
            state.users += 1
        }
    }

    /// Starts delivering a shared backend's change feed to this process's brokers (once for all
    /// of them); returns when the backend listens.
    ///
    /// - Throws: What the backend throws when it cannot listen; nothing is retained then.
    func retainFeed(_ storage: any TaskStorage) async throws {
        let notifier = self.notifier
        let started = feed.withLock { state in
            state.users += 1
            if let delivery = state.delivery { return delivery.started }
            let started = Deferred<Result<Void, any Error>>()
            // One task: it starts the feed, then delivers it until cancelled (which ends the
            // backend's stream, and with it the feed).
            let task = Task {
                let stream: AsyncStream<[TaskStorageChange]>?
                do {
                    stream = try await storage.changes()
                } catch {
                    started.fill(value: .failure(error))
                    return
                }
                started.fill(value: .success(()))
                guard let stream else { return }
                for await batch in stream {
                    notifier.notify(batch.flatMap(TaskChange.changes(from:)))
                }
            }
            state.delivery = (task, started)
            return started
        }
        do {
            try await started.value.get()
        } catch {
            feed.withLock { state in
                state.users -= 1
                if state.delivery?.started === started { state.delivery = nil }
            }
            throw error
        }
    }

    /// Stops delivering the change feed once no broker needs it.
    func releaseFeed() {
        let stopped = feed.withLock { state -> Task<Void, Never>? in
            state.users -= 1
            guard state.users == 0 else { return nil }
            defer { state.delivery = nil }
            return state.delivery?.task
        }
        stopped?.cancel()
    }

    /// Stops watching once no broker needs it.
    package func releaseWatcher() {
        let stopped = watcher.withLock { state -> (any ExternalChangeWatching)? in
            state.users -= 1
            guard state.users == 0 else { return nil }
            defer { state.watcher = nil }
            return state.watcher
        }
        stopped?.cancel()
    }
}

