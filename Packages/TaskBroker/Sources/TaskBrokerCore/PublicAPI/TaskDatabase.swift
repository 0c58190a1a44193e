public import Foundation
import Synchronization
import Tracing

/// Where a broker's actions live: saving an action enqueues it, deleting it cancels it.
///
/// ```swift
/// let database = try await TaskDatabase.sqlite(path: "/var/lib/app/tasks.sqlite")
/// try await database.save(MessageSendAction(key: "m1", collection: "messages", queueName: "handler1-q"))
/// ```
///
/// A `TaskDatabase` wraps a ``TaskStorage`` backend. `TaskDatabase.sqlite(path:configuration:)`
/// (module TaskBrokerSQLite, which `import TaskBroker` brings) is the embedded default;
/// ``init(storage:)`` takes any other backend. Every write made through one `TaskDatabase` wakes the brokers set up on it at once; there is no polling. On Linux, a write
/// another process commits to the same SQLite file (the `queuekit` tool, an app process that only
/// enqueues) wakes them too: the file keeps a short journal of changed queues, and the brokers
/// learn of each commit through inotify.
///
/// A call whose task is cancelled throws `CancellationError`. One cancelled while its commit was
/// on its way may have been applied: read the database again before you repeat it (or save with
/// ``saveIfAbsent(_:)``). Any other failure throws ``TaskBrokerError``, and its message says
/// whether the operation was applied.
public final class TaskDatabase: Sendable {
    /// The backend that stores the actions.
    public let storage: any TaskStorage
    /// What every `TaskDatabase` on this storage in this process shares: the brokers' claims and
    /// the change notifications.
    package let hub: DatabaseHub
    /// The backend as a store of one machine's processes (the SQLite file), if it is one.
    let machineLocal: (any MachineLocalStorage)?
    var registry: ClaimRegistry { hub.registry }

    /// Wraps a backend (an in-memory fake, or another database).
    ///
    /// - Parameter storage: The backend.
    public init(storage: any TaskStorage) {
        self.storage = storage
        self.machineLocal = storage as? any MachineLocalStorage
        self.hub = machineLocal?.hub ?? DatabaseHub()
    }

    /// Registers a broker: in this process (no other broker of the same name or an overlapping
    /// prefix) and against brokers of other processes (a backend of one machine's processes:
    /// ``MachineLocalStorage``'s locks; a shared backend that keeps broker names:
    /// ``SharedBrokerNames``), then starts watching for other processes' changes.
    func register(_ claim: BrokerClaim) async throws -> BrokerRegistration {
        let brokerID = try registry.register(claim)
        if storage.isShared {
            // Brokers of the same name on other connections or in other processes are workers of
            // one pool: the leases keep them apart. Listen before the stored queues are listed.
            do {
                try await hub.retainFeed(storage)
            } catch {
                registry.unregister(brokerID)
                throw error
            }
            // Against brokers of other processes whose names overlap this one's.
            let names = storage as? any SharedBrokerNames
            do {
                try await names?.registerBroker(name: claim.name, claimsPrefix: claim.isPrefixClaim)
            } catch {
                hub.releaseFeed()
                registry.unregister(brokerID)
                throw error
            }
            return BrokerRegistration(brokerID: brokerID, claim: claim, hub: hub, feeds: true, names: names)
        }
        guard let machineLocal else {
            return BrokerRegistration(brokerID: brokerID, claim: claim, hub: hub)
        }
        let release: @Sendable () -> Void
        do {
            release = try await machineLocal.lockBroker(claim)
        } catch {
            registry.unregister(brokerID)
            throw error
        }
        return BrokerRegistration(brokerID: brokerID, claim: claim, hub: hub, releaseLock: release)
    }

    /// Delivers changes made through this database to its brokers, unless the backend's change
    /// feed delivers them (shared backends: every process sees every commit the same way) or the
    /// backend announced them from the commit (``MachineLocalStorage``: in commit order, which
    /// this call, made after the write returned, cannot promise).
    package func publish(_ changes: [TaskChange]) {
        guard !storage.isShared, machineLocal == nil else { return }
        hub.publish(changes)
    }

    /// Enqueues an action, or replaces the stored action with the same key and collection
    /// (which clears its pause, so it runs again without waiting for an old timer).
    ///
    /// When this returns the action is committed (durably, with the default configuration).
    ///
    /// - Parameter action: The action to enqueue.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed` or `.storageFailed`.
    public func save<Action: TaskQueueAction>(_ action: Action) async throws {
        try await save([action])
    }

    /// Enqueues several actions in one transaction.
    ///
    /// - Parameter actions: The actions to enqueue, in order.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed` or `.storageFailed`; nothing is saved then.
    public func save<Action: TaskQueueAction>(_ actions: [Action]) async throws {
        try await save(actions, notBefore: nil, priority: 0)
    }

    /// Enqueues an action to start no earlier than `date` (run later), or replaces the stored
    /// action with the same key and collection.
    ///
    /// The action is stored at once and keeps its place in its queue: the queue's later actions
    /// wait behind it (each queue runs in order), while other queues go on. A date in the past
    /// means at once. The time survives restarts; a broker wakes up for the earliest time it
    /// knows of, with one timer, and finds the actions whose time has come through an index.
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock).
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument` (a date that
    ///   is no time) or `.storageFailed`.
    public func save<Action: TaskQueueAction>(_ action: Action, notBefore date: Date) async throws {
        try await save([action], notBefore: date)
    }

    /// Enqueues several actions in one transaction, each to start no earlier than `date`, as the
    /// single-action form does.
    ///
    /// - Parameters:
    ///   - actions: The actions to enqueue, in order.
    ///   - date: The earliest start (wall clock).
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument` or
    ///   `.storageFailed`; nothing is saved then.
    public func save<Action: TaskQueueAction>(_ actions: [Action], notBefore date: Date) async throws {
        try await save(actions, notBefore: date, priority: 0)
    }

    /// Enqueues an action with a priority, or replaces the stored action with the same key and
    /// collection: when more queues of a broker may start than it has slots, a queue whose head
    /// has the larger priority starts first (0 is the default; negative numbers run after it).
    /// Within a queue the order does not change: each queue runs in order.
    ///
    /// ```swift
    /// try await database.save(PasswordResetMail(key: id, queueName: "mail-\(user)"), priority: 10)
    /// try await database.save(Digest(key: day, queueName: "mail-digest"), notBefore: tomorrow, priority: -1)
    /// ```
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Its turn among the ready queues of its broker: larger first.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument` or `.storageFailed`.
    public func save<Action: TaskQueueAction>(_ action: Action, notBefore date: Date? = nil, priority: Int) async throws {
        try await save([action], notBefore: date, priority: priority)
    }

    /// Enqueues several actions in one transaction, each with `priority`, as the single-action
    /// form does.
    ///
    /// - Parameters:
    ///   - actions: The actions to enqueue, in order.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Their turn among the ready queues of their broker: larger first.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument` or
    ///   `.storageFailed`; nothing is saved then.
    public func save<Action: TaskQueueAction>(_ actions: [Action], notBefore date: Date? = nil, priority: Int) async throws {
        try await withSpan("TaskBroker save", ofKind: .producer) { span in
            span.attributes["taskbroker.count"] = actions.count
            if let first = actions.first { span.attributes["taskbroker.queue"] = first.queueName }
            let encoder = JSONEncoder()
            let tasks = try actions.map { try NewTask(encoding: $0, with: encoder, notBefore: date, priority: priority) }
            let stored = try await storage.save(tasks)
            publish(stored.map { .saved($0) })
        }
    }

    /// Saves plain parallel actions: actions that need no order among themselves. They run side by
    /// side, up to ``TaskQueueBroker/Configuration/maxConcurrentParallelActions`` at once per broker,
    /// in every process that runs a broker whose name is a prefix of their queue name (or whose
    /// filter accepts it), larger priority first, then saved first. Each runs at least once under a
    /// claim of its own (on PostgreSQL, a lease with a fencing token: a worker whose claim expired
    /// stores nothing); a failure is retried as the handler says, ``TaskQueueBroker/Configuration/maxAttempts``
    /// and the time limit apply, and the last failure makes it a dead letter. Their queue name only
    /// groups them: an operator's pause holds them, rate limits do not, and they never wait for the
    /// queue's ordered actions nor those for them.
    ///
    /// ```swift
    /// try await database.saveParallel(users.map { WelcomeMail(key: $0.id, queueName: "mail-welcome") })
    /// ```
    ///
    /// An action whose key and collection are stored as a plain parallel action replaces it; the
    /// same key and collection may also be stored once as a queue's ordered action.
    ///
    /// - Parameters:
    ///   - actions: The actions.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Their turn: larger first (0 by default).
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument`,
    ///   `.storageFailed`, or `.unsupported` for a backend without plain parallel actions; nothing
    ///   is saved then.
    public func saveParallel<Action: TaskQueueAction>(_ actions: [Action], notBefore date: Date? = nil, priority: Int = 0) async throws {
        guard let storage = storage as? any ParallelTaskStorage else {
            throw TaskBrokerError(code: .unsupported, message: "This storage backend does not store plain parallel actions; nothing was saved.")
        }
        try await withSpan("TaskBroker save", ofKind: .producer) { span in
            span.attributes["taskbroker.count"] = actions.count
            if let first = actions.first { span.attributes["taskbroker.queue"] = first.queueName }
            let encoder = JSONEncoder()
            let tasks = try actions.map { try NewTask(encoding: $0, with: encoder, notBefore: date, priority: priority) }
            let stored = try await storage.saveParallel(tasks)
            if !stored.isEmpty { publish([.parallelReady(queueNames: Array(Set(stored.map(\.queueName))).sorted())]) }
        }
    }

    /// Saves one plain parallel action (see `saveParallel(_:notBefore:priority:)` for many).
    ///
    /// - Parameters:
    ///   - action: The action.
    ///   - date: The earliest start (wall clock); `nil` (the default) means at once.
    ///   - priority: Its turn: larger first (0 by default).
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument`,
    ///   `.storageFailed`, or `.unsupported`.
    public func saveParallel<Action: TaskQueueAction>(_ action: Action, notBefore date: Date? = nil, priority: Int = 0) async throws {
        try await saveParallel([action], notBefore: date, priority: priority)
    }

    /// Enqueues an action only if no action with its key and collection is stored (ready, running
    /// or a dead letter): a unique save. Atomic across processes: of several saving the same key at
    /// once, one stores it. An action that completed is no longer stored: its key may be saved again.
    ///
    /// - Parameter action: The action to enqueue.
    /// - Returns: Whether it was stored.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.storageFailed`, or `.unsupported`
    ///   for a backend without unique saves.
    @discardableResult
    public func saveIfAbsent<Action: TaskQueueAction>(_ action: Action) async throws -> Bool {
        try await saveIfAbsent(action, notBefore: nil)
    }

    /// A unique save (see ``saveIfAbsent(_:)``) to start no earlier than `date`, with a priority:
    /// a reminder scheduled once however many requests ask for it.
    ///
    /// - Parameters:
    ///   - action: The action to enqueue.
    ///   - date: The earliest start (wall clock); `nil` means at once.
    ///   - priority: Its turn among the ready queues of its broker: larger first (0 by default).
    /// - Returns: Whether it was stored.
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed`, `.invalidArgument`,
    ///   `.storageFailed`, or `.unsupported` for a backend without unique saves.
    @discardableResult
    public func saveIfAbsent<Action: TaskQueueAction>(_ action: Action, notBefore date: Date?, priority: Int = 0) async throws -> Bool {
        try await withSpan("TaskBroker save", ofKind: .producer) { span in
            span.attributes["taskbroker.count"] = 1
            span.attributes["taskbroker.queue"] = action.queueName
            let task = try NewTask(encoding: action, with: JSONEncoder(), notBefore: date, priority: priority)
            guard let stored = try await storage.saveIfAbsent(task) else { return false }
            publish([.saved(stored)])
            return true
        }
    }
}
