import Foundation
import Logging
import NIOCore
import PostgresNIO
public import TaskBrokerCore
import Synchronization

/// TaskBroker's PostgreSQL backend: per-name serial queues shared by worker processes on any
/// number of machines. Open it with `TaskBroker/TaskDatabase/postgres(configuration:)`.
///
/// Each queue has a row with its lease: the worker that holds it, until when, and a fencing epoch
/// that grows with every claim. A worker claims a ready queue's head (`FOR UPDATE SKIP LOCKED`),
/// renews the lease while the action runs, and stores the outcome only if it still holds the lease
/// under the same epoch, in the same transaction that releases it. A worker that dies loses its
/// leases when they expire; another worker then runs the action again (at-least-once). Every
/// write sends one `NOTIFY` per transaction; workers `LISTEN` instead of polling.
public final class PostgresTaskStorage: TaskStorage {
    /// How the backend connects.
    public let configuration: TaskDatabase.PostgresConfiguration
    /// The pool of the backend's own operations: claims, finishes, reads, saves, deletes.
    let client: PostgresClient
    /// The pool of lease renewals and releases, which therefore never wait for a connection
    /// behind the other operations (or behind your transactions): a renewal that waited past the
    /// lease's end let another worker run an action that still ran here.
    let leaseClient: PostgresClient
    /// The pool of your transactions (`TaskDatabase/write(_:)`), which may take as long as they like.
    let transactionClient: PostgresClient
    /// The pool of held batches of plain parallel actions.
    let heldClient: PostgresClient
    /// How many held batches are open, and until when the owner's expiry was last raised for them.
    let heldBatches = HeldBatchCount()
    /// Where your own writes outside a transaction run (saves, deletes, restarts, purges): the
    /// pool of your transactions. A save of many actions spends time in the client between its
    /// statements (building the statement, reading the rows it returns) that the idle limit of
    /// the broker's own pools does not allow for.
    var writeClient: PostgresClient { transactionClient }
    let sql: PostgresSchema
    let logger: Logger
    /// Ends an operation as soon as its connection closes.
    let closing = ClosingConnections()
    /// What this storage runs besides its callers' operations: children of `runner`.
    let background: BackgroundWork
    /// Runs the connection pools and the background work (``BackgroundWork``) in one task group,
    /// until this storage ends.
    private let runner: Task<Void, Never>
    /// Begins this storage's finish notifications (`ChangeMessage.originPrefix`): random letters
    /// and digits, so that its own change feed skips them without decoding them.
    let origin = String(UInt64.random(in: .min ... .max), radix: 36) + String(UInt64.random(in: .min ... .max), radix: 36)
    /// The change feeds of this storage (``changes()``), by number. A finish delivers its changes
    /// to them in process; its notifications are for the feeds of other storages.
    let localFeeds = Mutex<(next: Int, feeds: [Int: AsyncStream<[TaskStorageChange]>.Continuation])>((0, [:]))

    private init(
        configuration: TaskDatabase.PostgresConfiguration, clients: Pools, background: BackgroundWork, runner: Task<Void, Never>
    ) {
        self.configuration = configuration
        self.background = background
        self.client = clients.operations
        self.leaseClient = clients.leases
        self.transactionClient = clients.transactions
        self.heldClient = clients.held
        self.runner = runner
        self.sql = PostgresSchema(schema: configuration.schema)
        self.logger = configuration.logger
    }

    deinit {
        runner.cancel()
    }

    /// Connects, brings the schema up to date (once, however many workers start at once) and
    /// starts the connection pool.
    static func connect(_ configuration: TaskDatabase.PostgresConfiguration) async throws -> PostgresTaskStorage {
        let configuration = try configuration.validated()
        let schema = PostgresSchema(schema: configuration.schema)
        let connection = try await openConnection(configuration, id: 0)
        do {
            try await schema.migrate(on: connection, logger: configuration.logger, readOnly: configuration.readOnly)
        } catch {
            try? await connection.close()
            throw error
        }
        try? await connection.close()
        let pools = Pools(configuration)
        let background = BackgroundWork()
        let runner = Task {
            await withDiscardingTaskGroup { group in
                group.addTask { await pools.operations.run() }
                group.addTask { await pools.leases.run() }
                group.addTask { await pools.transactions.run() }
                group.addTask { await pools.held.run() }
                await background.drain(into: &group)
            }
        }
        return PostgresTaskStorage(configuration: configuration, clients: pools, background: background, runner: runner)
    }


    /// A connection of its own (the migration, the change feed), with errors a user can act on.
    ///
    /// - Parameters:
    ///   - configuration: Where to connect.
    ///   - id: The connection's number, for postgres-nio's logs.
    ///   - applicationName: What `pg_stat_activity.application_name` shows for it, if anything.
    static func openConnection(
        _ configuration: TaskDatabase.PostgresConfiguration, id: Int, applicationName: String? = nil
    ) async throws -> PostgresConnection {
        do {
            var connectionConfiguration = PostgresConnection.Configuration(
                host: configuration.host, port: configuration.port, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: try configuration.tls.connection()
            )
            connectionConfiguration.options.connectTimeout = .milliseconds(configuration.connectTimeout.milliseconds)
            var parameters: [(String, String)] = []
            if let applicationName { parameters.append(("application_name", applicationName)) }
            if configuration.readOnly { parameters.append(("default_transaction_read_only", "on")) }
            if !parameters.isEmpty {
                connectionConfiguration.options.additionalStartupParameters = parameters
            }
            return try await PostgresConnection.connect(configuration: connectionConfiguration, id: id, logger: configuration.logger)
        } catch {
            throw PostgresErrors.connectionFailed(error, configuration)
        }
    }

    // MARK: - TaskStorage

    /// Shared: several processes use the database; claims are leases.
    public var isShared: Bool { true }

    /// The lease of a claim: `PostgresConfiguration.leaseDuration`.
    public var leaseDuration: Duration? { configuration.leaseDuration }

    /// Enqueues actions in one transaction (see `TaskStorage.save(_:)`) and notifies their queues.
    public func save(_ tasks: [NewTask]) async throws -> [StoredTask] {
        guard !tasks.isEmpty else { return [] }
        return try await transaction("save \(tasks.count) action(s)", on: writeClient) { connection in
            try await self.save(tasks, on: connection)
        }
    }

    /// Saves inside a transaction the caller runs (`save(_:)`, `PostgresTaskTransaction`).
    func save(_ tasks: [NewTask], on connection: PostgresConnection) async throws -> [StoredTask] {
        // One statement per batch of distinct keys: a key saved twice in one call is saved twice,
        // in order, as the SQLite backend does.
        var stored: [StoredTask] = []
        var batch: [NewTask] = []
        var keys: Set<[String]> = []
        for task in tasks {
            if !keys.insert([task.collection, task.key]).inserted {
                stored += try await saveDistinct(batch, on: connection)
                batch = []
                keys = [[task.collection, task.key]]
            }
            batch.append(task)
        }
        stored += try await saveDistinct(batch, on: connection)
        return stored
    }

    /// The longest queue name, and key and collection together, in UTF-8 bytes: PostgreSQL's
    /// B-tree indexes refuse an entry of more than 2,704 bytes (after compression, so the limit
    /// a name meets would depend on its letters), and the queue's and the key's are such entries.
    static let longestName = 2_600

    /// Refuses names PostgreSQL's indexes cannot take, before anything is written.
    static func checkLengths(of tasks: [NewTask]) throws {
        for task in tasks where task.queueName.utf8.count > Self.longestName || task.key.utf8.count + task.collection.utf8.count > Self.longestName {
            throw TaskBrokerError(
                code: .invalidName,
                message: "The action \(task.collection.prefix(40))/\(task.key.prefix(40))… has a queue name of \(task.queueName.utf8.count) bytes and a key and collection of \(task.key.utf8.count + task.collection.utf8.count) bytes; PostgreSQL's indexes take at most \(Self.longestName) bytes for each. Nothing was saved."
            )
        }
    }

    private func saveDistinct(_ tasks: [NewTask], on connection: PostgresConnection) async throws -> [StoredTask] {
        guard !tasks.isEmpty else { return [] }
        try Self.checkLengths(of: tasks)
        let rows = try await connection.query(
            sql.saveQuery(
                collections: tasks.map(\.collection), keys: tasks.map(\.key), queueNames: tasks.map(\.queueName),
                payloads: tasks.map { ByteBuffer(bytes: $0.payload) },
                notBefores: tasks.map { $0.notBefore?.timeIntervalSince1970 ?? .nan }, priorities: tasks.map { Int64($0.priority) },
                traceContexts: tasks.map { TaskTraceHeaders.encoded($0.traceContext) ?? "" }
            ),
            logger: logger
        )
        var saved: [[String]: (position: Int64, revision: Int64, previousQueue: String?)] = [:]
        for try await (collection, key, position, revision, previousQueue) in rows.decode((String, String, Int64, Int64, String?).self) {
            saved[[collection, key]] = (position, revision, previousQueue)
        }
        var changed: Set<String> = []
        let stored = try tasks.map { task in
            guard let row = saved[[task.collection, task.key]] else {
                throw TaskBrokerError(code: .storageFailed, message: "The save of \(task.collection)/\(task.key) returned no row.")
            }
            changed.insert(task.queueName)
            if let previous = row.previousQueue { changed.insert(previous) }
            return StoredTask(
                key: task.key, collection: task.collection, queueName: task.queueName, payload: task.payload,
                position: row.position, revision: row.revision, notBefore: task.notBefore, priority: task.priority,
                traceContext: task.traceContext
            )
        }
        try await notify(ChangeMessage.chunks(queues: changed.sorted()), on: connection)
        return stored
    }

    /// Stores an action unless its key and collection are stored (see `TaskStorage.saveIfAbsent(_:)`).
    public func saveIfAbsent(_ task: NewTask) async throws -> StoredTask? {
        try await transaction("save \(task.collection)/\(task.key) if absent", on: writeClient) { connection in
            try await self.saveIfAbsent(task, on: connection)
        }
    }

    func saveIfAbsent(_ task: NewTask, on connection: PostgresConnection) async throws -> StoredTask? {
        try Self.checkLengths(of: [task])
        var stored: StoredTask?
        for try await (position, revision) in try await connection.query(sql.saveIfAbsentQuery(task), logger: logger).decode((Int64, Int64).self) {
            stored = StoredTask(
                key: task.key, collection: task.collection, queueName: task.queueName, payload: task.payload,
                position: position, revision: revision, notBefore: task.notBefore, priority: task.priority,
                traceContext: task.traceContext
            )
        }
        if stored != nil {
            try await notify(ChangeMessage.chunks(queues: [task.queueName]), on: connection)
        }
        return stored
    }

    /// Deletes an action (see `TaskStorage.delete(key:collection:)`) and notifies its queue.
    public func delete(key: String, collection: String) async throws -> StoredTask? {
        try await transaction("delete \(collection)/\(key)", on: writeClient) { connection in
            try await self.delete(key: key, collection: collection, on: connection)
        }
    }

    func delete(key: String, collection: String, on connection: PostgresConnection) async throws -> StoredTask? {
        let rows = try await connection.query(sql.deleteQuery(collection: collection, key: key), logger: logger)
        var deleted: StoredTask?
        for try await row in rows {
            deleted = try PostgresSchema.task(row)
        }
        if let deleted {
            try await notify(ChangeMessage.chunks(queues: [deleted.queueName]), on: connection)
        }
        return deleted
    }

    /// Claims the heads' queues under leases (see `TaskStorage.claim(_:owner:leaseDuration:)`).
    public func claim(_ heads: [StoredTask], owner: String, leaseDuration: Duration) async throws -> [TaskClaimResult] {
        guard !heads.isEmpty else { return [] }
        let lease = configuration.leaseDuration
        return try await run("claim \(heads.count) queue(s)") {
            // Granted once committed (see `committed(_:)`): a lease that never reached the
            // database would let two workers run the queue.
            let answers = try await committed { [self] connection in
                let rows = try await connection.query(sql.claimQuery(heads: heads, owner: owner, leaseMilliseconds: lease.milliseconds), logger: logger)
                var answers: [String: (valid: Bool, epoch: Int64?, remaining: Double?, heldByOther: Bool)] = [:]
                // A taken queue's row (with its epoch) comes first; the row every head then gets says
                // what the snapshot showed, which matters only for the heads not taken.
                for try await row in rows {
                    var cells = RowReader(row)
                    let queueName: String = try cells.next()
                    let answer = (valid: try cells.next(Bool.self), epoch: try cells.next(Int64?.self), remaining: try cells.next(Double?.self),
                                  heldByOther: try cells.next(Bool.self))
                    if answers[queueName]?.epoch == nil { answers[queueName] = answer }
                }
                return answers
            }
            let now = Date()
            return heads.map { head -> TaskClaimResult in
                guard let answer = answers[head.queueName] else { return .changed }
                if let epoch = answer.epoch {
                    return .granted(epoch: epoch)
                }
                // Another worker holds the queue: wait for its lease, even if this head is gone (the
                // holder runs the queue and completes heads faster than their notifications arrive:
                // reading the queue again at once found another gone head, again and again, and four
                // workers spent most of their time reading queues that one worker held).
                if answer.heldByOther, let remaining = answer.remaining, remaining > 0 {
                    return .heldElsewhere(until: now.addingTimeInterval(remaining))
                }
                guard answer.valid else { return .changed }
                // Free, or this worker's own, but its row locked by another transaction (another
                // worker claiming it right now, or this worker's own renewal or release): look again
                // soon. Not when this worker's own lease ends: it waited up to a whole lease for
                // itself, and no one else could take the queue meanwhile.
                return .heldElsewhere(until: now.addingTimeInterval(0.05))
            }
        }
    }

    /// Notifies the other processes' change feeds that a worker of `pool` has room
    /// (one notification that names the pool and the room, no table).
    public func announceSpareCapacity(pool: String, room: Int) async throws {
        guard let payload = ChangeMessage.spareCapacity(pool: pool, room: room, origin: origin) else {
            logger.debug("a pool name too long for a notification: its workers do not ask each other for queues")
            return
        }
        try await transaction("ask for queues") { [self] connection in
            try await notify([payload], on: connection)
        }
    }

    /// Clears the pauses of the given queues and notifies them.
    public func resume(queues queueNames: [String]) async throws -> [StoredTask] {
        guard !queueNames.isEmpty else { return [] }
        return try await transaction("resume \(queueNames.count) queue(s)", on: writeClient) { [self] connection in
            var resumed: [StoredTask] = []
            for try await row in try await connection.query(sql.resumeQuery(queueNames: queueNames), logger: logger) {
                resumed.append(try PostgresSchema.task(row))
            }
            try await notify(ChangeMessage.chunks(queues: Set(resumed.map(\.queueName)).sorted(), resumed: true), on: connection)
            return resumed
        }
    }

    /// Deletes every action of a queue and notifies it.
    public func purge(queue queueName: String) async throws -> Int {
        try await transaction("purge queue \(queueName)", on: writeClient) { [self] connection in
            var count = 0
            for try await deleted in try await connection.query(sql.purgeQuery(queueName: queueName), logger: logger).decode(Int.self) {
                count = deleted
            }
            try await notify(ChangeMessage.chunks(queues: [queueName]), on: connection)
            return count
        }
    }

    /// The stored state of every queue that has actions, sorted by name.
    public func snapshot() async throws -> [TaskQueueSnapshot] {
        try await run("read the queues' state") {
            try await withConnection { [self] connection in
                var snapshots: [TaskQueueSnapshot] = []
                let rows = try await connection.query(sql.snapshotQuery(), logger: logger)
                for try await (name, pending, attempts, pauseKind, pauseUntil, reason, failedAt, oldest)
                    in rows.decode((String, Int, Int32, Int16?, Double?, String?, Double?, Double?).self) {
                    snapshots.append(TaskQueueSnapshot(
                        name: name, pending: pending, pause: PostgresSchema.pause(kind: pauseKind, until: pauseUntil), attempts: Int(attempts),
                        lastFailure: PostgresSchema.failure(reason: reason, at: failedAt),
                        oldestSavedAt: oldest.map(Date.init(timeIntervalSince1970:))
                    ))
                }
                var deadLetters: [String: Int] = [:]
                for try await (name, count) in try await connection.query(sql.deadLetterCountsQuery(), logger: logger).decode((String, Int).self) {
                    deadLetters[name] = count
                }
                for index in snapshots.indices {
                    snapshots[index].deadLetters = deadLetters.removeValue(forKey: snapshots[index].name) ?? 0
                }
                snapshots += deadLetters.map { TaskQueueSnapshot(name: $0.key, pending: 0, deadLetters: $0.value) }
                return snapshots.sorted { $0.name < $1.name }
            }
        }
    }

    /// The change feed: notifications of every process's commits (see `TaskStorage.changes()`).
    public func changes() async throws -> AsyncStream<[TaskStorageChange]>? {
        try await PostgresChangeFeed.start(storage: self)
    }

    // MARK: - Plumbing

    /// Registers a change feed of this storage, which then hears this storage's finishes in
    /// process; returns its number for ``removeLocalFeed(_:)``.
    func addLocalFeed(_ feed: AsyncStream<[TaskStorageChange]>.Continuation) -> Int {
        localFeeds.withLock { state in
            state.next += 1
            state.feeds[state.next] = feed
            return state.next
        }
    }

    func removeLocalFeed(_ number: Int) {
        _ = localFeeds.withLock { $0.feeds.removeValue(forKey: number) }
    }

    /// Sends the change notifications of a transaction (delivered when it commits).
    func notify(_ payloads: [String], on connection: PostgresConnection) async throws {
        guard !payloads.isEmpty else { return }
        try await connection.execute(sql.notifyQuery(payloads: payloads), logger: logger)
    }

}
