import Foundation
import Logging
import NIOCore
import PostgresNIO
public import TaskBroker
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
    let sql: PostgresSchema
    let logger: Logger
    /// Ends an operation as soon as its connection closes.
    private let closing = ClosingConnections()
    private let runner: Task<Void, Never>
    /// The epoch of each lease a broker of this process holds, by owner and queue.
    /// (By owner first: one string hashed per look-up, not two.)
    private let epochs = Mutex<[String: [String: Int64]]>([:])
    /// Begins this storage's finish notifications (`ChangeMessage.originPrefix`): random letters
    /// and digits, so that its own change feed skips them without decoding them.
    let origin = String(UInt64.random(in: .min ... .max), radix: 36) + String(UInt64.random(in: .min ... .max), radix: 36)
    /// The change feeds of this storage (``changes()``), by number. A finish delivers its changes
    /// to them in process; its notifications are for the feeds of other storages.
    private let localFeeds = Mutex<(next: Int, feeds: [Int: AsyncStream<[TaskStorageChange]>.Continuation])>((0, [:]))

    private init(configuration: TaskDatabase.PostgresConfiguration, clients: Pools, runner: Task<Void, Never>) {
        self.configuration = configuration
        self.client = clients.operations
        self.leaseClient = clients.leases
        self.transactionClient = clients.transactions
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
            try await schema.migrate(on: connection, logger: configuration.logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try? await connection.close()
        let pools = Pools(configuration)
        let runner = Task {
            await withDiscardingTaskGroup { group in
                group.addTask { await pools.operations.run() }
                group.addTask { await pools.leases.run() }
                group.addTask { await pools.transactions.run() }
            }
        }
        return PostgresTaskStorage(configuration: configuration, clients: pools, runner: runner)
    }

    /// The three connection pools of a storage.
    struct Pools {
        let operations: PostgresClient
        let leases: PostgresClient
        let transactions: PostgresClient

        /// How many connections the lease pool opens: renewals wait for nothing else, and a
        /// release beside a renewal does not hold it up.
        static let leaseConnections = 2

        init(_ configuration: TaskDatabase.PostgresConfiguration) {
            // The backend's own transactions never wait for their client between statements
            // (BEGIN, one statement, COMMIT): one still open after the renewal's limit (a quarter
            // of the lease) belongs to a worker that died without a word (power, a network cut)
            // after the server ran its statement. Its row locks would keep every other worker
            // from the queues it claimed until TCP keepalive gives up on it (over two hours by
            // default); the server ends it instead, and the takeover waits at most the lease.
            let own = Self.sessionSettings(idleInTransaction: PostgresTaskStorage.renewalLimit(configuration))
            operations = Self.pool(configuration, size: configuration.poolSize, name: "taskbroker \(configuration.schema)", settings: own)
            leases = Self.pool(configuration, size: Self.leaseConnections, name: "taskbroker \(configuration.schema)", settings: own)
            transactions = Self.pool(
                configuration, size: configuration.transactionPoolSize, name: "taskbroker tx \(configuration.schema)",
                settings: Self.sessionSettings(idleInTransaction: configuration.transactionIdleTimeout)
            )
        }

        /// Settings sent when a session starts: TCP keepalive probes that find a peer gone without
        /// a word within about two minutes (the system default is over two hours), and the time
        /// a transaction may sit idle waiting for its client (`nil`: as long as it likes).
        static func sessionSettings(idleInTransaction: Duration?) -> [(String, String)] {
            var settings = [("tcp_keepalives_idle", "60"), ("tcp_keepalives_interval", "10"), ("tcp_keepalives_count", "6")]
            if let idleInTransaction {
                settings.append(("idle_in_transaction_session_timeout", "\(max(1, idleInTransaction.milliseconds))"))
            }
            return settings
        }

        private static func pool(
            _ configuration: TaskDatabase.PostgresConfiguration, size: Int, name: String, settings: [(String, String)]
        ) -> PostgresClient {
            var options = PostgresClient.Configuration.Options()
            options.maximumConnections = size
            options.connectTimeout = configuration.connectTimeout
            // What `pg_stat_activity.application_name` shows for the pool's connections (the feed's
            // show `taskbroker feed <schema>`).
            options.additionalStartupParameters = [("application_name", name)] + settings
            var clientConfiguration = PostgresClient.Configuration(
                host: configuration.host, port: configuration.port, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: configuration.tls.client
            )
            clientConfiguration.options = options
            return PostgresClient(configuration: clientConfiguration, backgroundLogger: configuration.logger)
        }
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
            if let applicationName {
                connectionConfiguration.options.additionalStartupParameters = [("application_name", applicationName)]
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
        return try await transaction("save \(tasks.count) action(s)") { connection in
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

    private func saveDistinct(_ tasks: [NewTask], on connection: PostgresConnection) async throws -> [StoredTask] {
        guard !tasks.isEmpty else { return [] }
        for task in tasks where task.queueName.utf8.count > Self.longestName || task.key.utf8.count + task.collection.utf8.count > Self.longestName {
            throw TaskBrokerError(
                code: .invalidName,
                message: "The action \(task.collection.prefix(40))/\(task.key.prefix(40))… has a queue name of \(task.queueName.utf8.count) bytes and a key and collection of \(task.key.utf8.count + task.collection.utf8.count) bytes; PostgreSQL's indexes take at most \(Self.longestName) bytes for each. Nothing was saved."
            )
        }
        let rows = try await connection.query(
            sql.saveQuery(
                collections: tasks.map(\.collection), keys: tasks.map(\.key), queueNames: tasks.map(\.queueName),
                payloads: tasks.map { ByteBuffer(bytes: $0.payload) }
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
                position: row.position, revision: row.revision
            )
        }
        try await notify(ChangeMessage.chunks(queues: changed.sorted()), on: connection)
        return stored
    }

    /// Deletes an action (see `TaskStorage.delete(key:collection:)`) and notifies its queue.
    public func delete(key: String, collection: String) async throws -> StoredTask? {
        try await transaction("delete \(collection)/\(key)") { connection in
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

    /// The names of every queue that has stored actions, sorted.
    public func queueNames() async throws -> [String] {
        try await run("list the queues") {
            try await withConnection { [self] connection in
                var names: [String] = []
                for try await name in try await connection.query(sql.queueNamesQuery(), logger: logger).decode(String.self) {
                    names.append(name)
                }
                return names
            }
        }
    }

    /// Every stored action of the given queue(s), in enqueue order.
    public func tasks(inQueue queueName: String) async throws -> [StoredTask] {
        try await tasks(inQueues: [queueName])[queueName] ?? []
    }

    /// Every stored action of the given queue(s), in enqueue order.
    public func tasks(inQueues queueNames: [String]) async throws -> [String: [StoredTask]] {
        guard !queueNames.isEmpty else { return [:] }
        return try await run("read \(queueNames.count) queue(s)") {
            var result = try await withConnection { [self] connection in
                var result: [String: [StoredTask]] = [:]
                let rows = try await connection.query(sql.tasksQuery(queueNames: queueNames), logger: logger)
                for try await row in rows {
                    let task = try PostgresSchema.task(row)
                    result[task.queueName, default: []].append(task)
                }
                return result
            }
            // In enqueue order (the statement does not sort; rows mostly come in that order already).
            // In place, through `values[index]`: sorting through `result[queueName]?` copied every
            // queue's array, and a profile of reads of 25,600 actions showed the copies (~4 % of its samples).
            for index in result.values.indices where !result.values[index].isInEnqueueOrder {
                result.values[index].sort { $0.position < $1.position }
            }
            return result
        }
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
            var granted: [String: Int64] = [:]
            let results = heads.map { head -> TaskClaimResult in
                guard let answer = answers[head.queueName] else { return .changed }
                if let epoch = answer.epoch {
                    granted[head.queueName] = epoch
                    return .granted
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
            epochs.withLock { $0[owner, default: [:]].merge(granted) { _, new in new } }
            return results
        }
    }

    /// Stores outcomes whose lease `owner` still holds and releases the leases (see `TaskStorage.finish(_:owner:)`).
    @discardableResult
    public func finish(_ outcomes: [TaskOutcome], owner: String) async throws -> TaskFinishReport {
        try await finish(outcomes, claimingNext: [:], owner: owner, leaseDuration: configuration.leaseDuration)
    }

    /// Stores outcomes whose lease `owner` still holds; releases the leases, except those of
    /// completed queues whose next head it claims in the same statement (see
    /// `TaskStorage.finish(_:claimingNext:owner:leaseDuration:)`).
    @discardableResult
    public func finish(
        _ outcomes: [TaskOutcome], claimingNext nextHeads: [String: StoredTask], owner: String, leaseDuration: Duration
    ) async throws -> TaskFinishReport {
        guard !outcomes.isEmpty else { return TaskFinishReport() }
        let leases = epochs.withLock { epochs in
            let held = epochs[owner] ?? [:]
            return outcomes.map { held[$0.task.queueName] ?? -1 }
        }
        let lease = configuration.leaseDuration
        // One statement: the outcomes, the leases' release (or their renewal for the next heads it
        // claims) and the change notifications (a round trip each for the statement and the
        // notifications before), in a transaction of its own: stored once its COMMIT answers (see
        // `committed(_:)`).
        let count = outcomes.count
        // `kept`, per outcome, by position: the epoch of a lease kept for the next head.
        // `outdatedAt`, per outcome, by position: storage held a newer state of its action.
        let (report, changes, kept, outdatedAt) = try await runAgainIfAborted("store \(count) outcome(s)") {
            try await committed { [self] connection -> (TaskFinishReport, [TaskStorageChange], [Int64?], [Bool]) in
                var kept = [Int64?](repeating: nil, count: count)
                var outdatedAt = [Bool](repeating: false, count: count)
                let rows = try await connection.query(
                    sql.finishQuery(
                        outcomes: outcomes, epochs: leases, nextHeads: nextHeads, owner: owner, origin: origin,
                        leaseMilliseconds: lease.milliseconds
                    ),
                    logger: logger
                )
                var held = [Bool](repeating: false, count: count)
                var applied = [Bool](repeating: false, count: count)
                var failedAny = false
                var failed = [Bool](repeating: false, count: count)
                for try await row in rows {
                    var cells = RowReader(row)
                    let positions: [Int64] = try cells.next()
                    let kinds: [Int16] = try cells.next()
                    let values: [Int64] = try cells.next()
                    guard kinds.count == positions.count, values.count == positions.count else {
                        throw TaskBrokerError(code: .storageFailed, message: "The finish statement returned arrays of different lengths.")
                    }
                    for (entry, position) in positions.enumerated() {
                        let index = Int(position) - 1
                        guard index >= 0, index < count else { continue }
                        switch kinds[entry] {
                        case PostgresSchema.FinishRow.held:
                            held[index] = true
                        case PostgresSchema.FinishRow.next:
                            held[index] = true
                            kept[index] = values[entry]
                        case PostgresSchema.FinishRow.done:
                            applied[index] = true
                        case PostgresSchema.FinishRow.failed:
                            applied[index] = true
                            failed[index] = true
                            failedAny = true
                        default: break
                        }
                    }
                }
                var report = TaskFinishReport()
                var completed: [StoredTask] = []
                var failedQueues: Set<String> = []
                for (index, outcome) in outcomes.enumerated() {
                    let task = outcome.task
                    guard held[index] else {
                        report.fenced.insert(task.queueName)
                        continue
                    }
                    guard applied[index] else {
                        report.outdated.insert(task.queueName)
                        kept[index] = nil
                        outdatedAt[index] = true
                        continue
                    }
                    if failed[index] {
                        failedQueues.insert(task.queueName)
                    } else {
                        // A next head counts as claimed only if the completion before it was applied (a
                        // completion outdated by a concurrent save keeps the lease until the broker
                        // claims the queue again, or it expires). Its queue stays held: like the
                        // statement's notifications, the feeds are not told of that completion.
                        if kept[index] != nil {
                            report.continued.insert(task.queueName)
                        } else {
                            completed.append(StoredTask(
                                key: task.key, collection: task.collection, queueName: task.queueName, payload: Data(), position: 0,
                                revision: task.revision
                            ))
                        }
                    }
                }
                // What the statement's notifications tell other storages' feeds, told to this one's
                // once committed.
                var changes: [TaskStorageChange] = []
                if failedAny { changes.append(.queuesChanged(failedQueues.sorted())) }
                if !completed.isEmpty { changes.append(.completed(completed)) }
                return (report, changes, kept, outdatedAt)
            }
        }
        if !changes.isEmpty {
            for feed in localFeeds.withLock({ Array($0.feeds.values) }) {
                feed.yield(changes)
            }
        }
        epochs.withLock { epochs in
            var held = epochs.removeValue(forKey: owner) ?? [:]
            for (index, outcome) in outcomes.enumerated() {
                held[outcome.task.queueName] = kept[index]
            }
            if !held.isEmpty { epochs[owner] = held }
        }
        // An outdated outcome (its action deleted or saved again while it ran) stored nothing, and
        // the statement let its lease go without a word, or kept it for a next head that no longer
        // follows. The broker reads the queue again and claims it anew; until then the lease is
        // let go and announced, so that no worker waits for it to expire (one kept here was not
        // released at shutdown either: the broker did not know of it). Under that outcome's epoch:
        // a claim made since holds a newer one, and is left alone.
        let outdated = outcomes.indices.compactMap { index -> (queueName: String, epoch: Int64)? in
            outdatedAt[index] && leases[index] >= 0 ? (outcomes[index].task.queueName, leases[index]) : nil
        }
        if !outdated.isEmpty {
            // In the background: the report does not wait for it (the batch's other queues wait
            // for their outcomes, and their kept leases for renewals that would wait behind it).
            Task { [logger] in
                do {
                    try await self.releaseLeases(outdated, owner: owner)
                } catch {
                    // Nothing stored is at stake: those leases expire after one lease, as a dead worker's do.
                    logger.debug("could not let go of \(outdated.count) lease(s) of outdated outcomes: \(error)")
                }
            }
        }
        if !report.fenced.isEmpty {
            logger.warning("refused the outcomes of \(report.fenced.count) queue(s) whose lease \(owner) no longer holds: \(report.fenced.sorted().prefix(5).joined(separator: ", "))")
        }
        return report
    }

    /// Extends the leases `owner` holds on queues whose actions still run; returns those it lost.
    /// A lease whose row another transaction holds is not waited for (see `PostgresSchema.renewQuery`).
    public func renew(_ queueNames: [String], owner: String, leaseDuration: Duration) async throws -> [String] {
        guard !queueNames.isEmpty else { return [] }
        return try await renew(heldLeases(queueNames, owner: owner), owner: owner)
    }

    /// The queues among `queueNames` whose leases `owner` holds, with their epochs, as this
    /// storage knows them: what a renewal renews.
    func heldLeases(_ queueNames: [String], owner: String) -> [(queueName: String, epoch: Int64)] {
        epochs.withLock { epochs in
            let held = epochs[owner] ?? [:]
            return queueNames.compactMap { name in held[name].map { (name, $0) } }
        }
    }

    /// Extends these leases (read by ``heldLeases(_:owner:)`` before: a finish may commit in
    /// between); returns those lost.
    func renew(_ held: [(queueName: String, epoch: Int64)], owner: String) async throws -> [String] {
        guard !held.isEmpty else { return [] }
        let lease = configuration.leaseDuration
        let renewed = try await run("renew \(held.count) lease(s)") {
            // Renewed once committed (see `committed(_:)`). A renewal that waits longer than a
            // quarter of the lease gives up, so that the broker's next try (a twelfth of the lease
            // later) still comes before the lease ends.
            try await committed(within: renewalLimit, on: leaseClient) { [self] connection in
                let rows = try await connection.query(
                    sql.renewQuery(queueNames: held.map(\.queueName), epochs: held.map(\.epoch), owner: owner, leaseMilliseconds: lease.milliseconds),
                    logger: logger
                )
                // Renewed, or still held with its row locked (a finish of it under way): not lost.
                var renewed: Set<String> = []
                for try await name in rows.decode(String.self) {
                    renewed.insert(name)
                }
                return renewed
            }
        }
        let (lost, releasedMeanwhile) = epochs.withLock { epochs in
            // A lease released meanwhile (its outcome stored) is not lost.
            let lost = held.filter { !renewed.contains($0.queueName) && epochs[owner]?[$0.queueName] == $0.epoch }
            // The finish of its action released it after the leases were read, and the renewal
            // then extended it again (same owner, same epoch): other workers would wait a whole
            // lease for a queue this worker let go.
            let releasedMeanwhile = held.filter { renewed.contains($0.queueName) && epochs[owner]?[$0.queueName] != $0.epoch }
            return (lost.map(\.queueName), releasedMeanwhile)
        }
        if !releasedMeanwhile.isEmpty {
            do {
                // Under the renewed epochs: a lease this worker claimed anew since is left alone.
                // Within the renewal's own limit: the next renewal waits for this one.
                try await releaseLeases(releasedMeanwhile, owner: owner, within: renewalLimit)
            } catch {
                // Nothing stored is at stake: those leases expire after one lease, as a dead worker's do.
                logger.debug("could not release again \(releasedMeanwhile.count) lease(s) that the renewal extended after their release: \(error)")
            }
        }
        return lost
    }

    /// Ends the leases of a claim that `owner` will not use, and notifies the queues so that
    /// workers waiting for those leases claim them at once (see `TaskStorage.release(_:owner:)`).
    public func release(_ queueNames: [String], owner: String) async throws {
        let held = epochs.withLock { epochs in
            queueNames.compactMap { name in epochs[owner]?.removeValue(forKey: name).map { (queueName: name, epoch: $0) } }
        }
        try await releaseLeases(held, owner: owner)
    }

    /// How long a renewal, and the release that may follow it, may wait for the server: a quarter
    /// of the lease (see `renew(_:owner:)`), or `operationTimeout` if shorter.
    private var renewalLimit: Duration {
        Self.renewalLimit(configuration)
    }

    static func renewalLimit(_ configuration: TaskDatabase.PostgresConfiguration) -> Duration {
        min(configuration.operationTimeout, configuration.leaseDuration / 4)
    }

    /// Ends these leases if `owner` still holds them under these epochs, and notifies their queues.
    private func releaseLeases(
        _ held: [(queueName: String, epoch: Int64)], owner: String, within timeout: Duration? = nil
    ) async throws {
        guard !held.isEmpty else { return }
        try await transaction("release \(held.count) lease(s)", within: timeout, on: leaseClient) { [self] connection in
            var released: [String] = []
            let rows = try await connection.query(
                sql.releaseQuery(queueNames: held.map(\.queueName), epochs: held.map(\.epoch), owner: owner), logger: logger
            )
            for try await name in rows.decode(String.self) {
                released.append(name)
            }
            try await notify(ChangeMessage.chunks(queues: released.sorted()), on: connection)
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
        return try await transaction("resume \(queueNames.count) queue(s)") { [self] connection in
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
        try await transaction("purge queue \(queueName)") { [self] connection in
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
                for try await (name, pending, attempts, pauseKind, pauseUntil) in rows.decode((String, Int, Int32, Int16?, Double?).self) {
                    snapshots.append(TaskQueueSnapshot(
                        name: name, pending: pending, pause: PostgresSchema.pause(kind: pauseKind, until: pauseUntil), attempts: Int(attempts)
                    ))
                }
                return snapshots
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

    /// Runs `body` in one transaction on a pooled connection: committed when it returns, rolled
    /// back when it throws (its error unchanged), with storage errors made typed; run again when
    /// PostgreSQL aborted it to break a deadlock (``runAgainIfAborted(_:_:)``). Only for this
    /// storage's own statements: a caller's `write` is never run twice.
    func transaction<T: Sendable>(
        _ what: String, within timeout: Duration? = nil, on pool: PostgresClient? = nil,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await runAgainIfAborted(what) {
            try await committed(within: timeout, on: pool, body)
        }
    }

    /// Runs `body` in a transaction of its own on a pooled connection, and returns once its COMMIT
    /// answered. A statement sent on its own is committed only after PostgreSQL answered that it
    /// completed, and postgres-nio reports it done on that answer: a commit that then failed (a
    /// full notification queue, a deferred check, a server that stopped before the commit reached
    /// its disk) went unseen, and the broker took an outcome that was never stored for stored (it
    /// ran the queue's next action, and the stored one ran again later, out of order). The
    /// explicit COMMIT answers only once the commit is done, or fails.
    func committed<T: Sendable>(
        within timeout: Duration? = nil, on pool: PostgresClient? = nil, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withConnection(within: timeout, on: pool) { [self] connection in
            try await Self.inTransaction(connection, logger: logger, body)
        }
    }

    /// Runs `body` on a connection of `pool` (the operations' pool unless given), and gives up on
    /// it as soon as the connection closes, or if the server has not answered within `timeout`
    /// (`PostgresConfiguration.operationTimeout` unless given).
    ///
    /// - A connection that closes (a server restart or failover, `pg_terminate_backend`, a reset)
    ///   ends the operation at once with ``ConnectionClosed``. postgres-nio writes a query to a
    ///   channel that is already closing without failing it, and the pool can hand out a
    ///   connection whose close it has not processed yet: without this, such an operation never
    ///   answered, and only the time limit ended it while its queue stood still.
    /// - A connection that stays open but silent (a network cut, a NAT that forgot it, a server
    ///   process that hangs) is closed when the time is up, and this throws ``NoAnswer``.
    ///   postgres-nio has no time limit of its own: the operation would wait for the operating
    ///   system to give up on the connection, many minutes.
    ///
    /// ``run(_:_:)`` makes either a `storageFailed` that says so; the pool replaces the connection.
    /// `body` runs in a task of its own, and this does not wait for it once the operation is given
    /// up on: a query sent on the connection after it was closed never answers (postgres-nio drops
    /// a statement written to a closed channel without failing it), and a `body` between two
    /// statements at that moment would hang forever, and its caller with it. Such a task is left
    /// behind (with what `body` holds); the transactions' own ROLLBACK is not sent on a closed
    /// connection, so it takes a close that lands between two statements. Cancelling the caller
    /// cancels `body`.
    func withConnection<T: Sendable>(
        within timeout: Duration? = nil, on pool: PostgresClient? = nil,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let limit = timeout ?? configuration.operationTimeout
        return try await (pool ?? client).withConnection { connection in
            let outcome = SettledOnce<T>()
            let done = closing.watch(connection) { outcome.settle(.failure(ConnectionClosed())) }
            defer { done() }
            let work = Task {
                do {
                    outcome.settle(.success(try await body(connection)))
                } catch {
                    outcome.settle(.failure(error))
                }
            }
            let watchdog = Task { [logger, configuration] in
                do {
                    try await Task.sleep(for: limit)
                } catch {
                    return
                }
                guard outcome.settle(.failure(NoAnswer(limit: limit))) else { return }
                logger.warning("PostgreSQL at \(configuration.endpoint) did not answer within \(limit); closing the connection")
                try? await connection.close()
            }
            let result = await withTaskCancellationHandler {
                await outcome.result
            } onCancel: {
                work.cancel()
            }
            // The pool gets the connection back only once the watchdog is done with it: a close
            // that landed after the release closed it under the next operation the pool gave it to.
            watchdog.cancel()
            await watchdog.value
            return try result.get()
        }
    }

    static func inTransaction<T>(
        _ connection: PostgresConnection, logger: Logger, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await connection.execute("BEGIN", logger: logger)
        let value: T
        do {
            value = try await body(connection)
        } catch {
            // Not on a connection the time limit closed: a statement written to a closed
            // connection never answers (see `withConnection(within:on:_:)`).
            if !connection.isClosed { try? await connection.execute("ROLLBACK", logger: logger) }
            throw error
        }
        // PostgreSQL answers the COMMIT of a transaction in which a statement failed with a
        // ROLLBACK, not an error: a body that caught that statement's error would otherwise
        // return as if everything it did were stored.
        let commit: EventLoopFuture<PostgresQueryResult> = connection.query("COMMIT", logger: logger)
        let tag = try await commit.get().metadata.command
        guard tag == "COMMIT" else {
            throw TaskBrokerError(
                code: .storageFailed,
                message: "PostgreSQL rolled the transaction back (its COMMIT answered \(tag)): a statement in it failed, "
                    + "and its error was caught inside the transaction. Nothing of it was stored; let the error out of the "
                    + "transaction (or roll back to a savepoint) and try again."
            )
        }
        return value
    }

    /// Runs one of this storage's own operations (``run(_:_:)``), and runs it again, up to three
    /// times in all, when PostgreSQL aborted it to break a deadlock or a serialization conflict:
    /// nothing of it was applied, and the transaction it conflicted with goes on. A save that
    /// replaces running actions in an order opposite to a finish's can deadlock with that finish;
    /// the caller of either should not see it.
    func runAgainIfAborted<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await run(what, body)
            } catch let error as TaskBrokerError where attempt < Self.attemptsAfterAborts && Self.wasAborted(error) {
                logger.notice("PostgreSQL aborted the attempt to \(what) (\(PostgresErrors.reason(error.underlying ?? error))); trying again")
                attempt += 1
            }
        }
    }

    static let attemptsAfterAborts = 3

    /// Whether PostgreSQL aborted the statement to break a deadlock (40P01) or a serialization
    /// conflict (40001).
    static func wasAborted(_ error: TaskBrokerError) -> Bool {
        guard let error = error.underlying as? PSQLError, let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40P01" || state == "40001"
    }

    /// Runs a storage operation; a PostgreSQL or connection error becomes `storageFailed`.
    func run<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as TaskBrokerError {
            throw error
        } catch let error as UserCodeFailed {
            throw error
        } catch let error as NoAnswer {
            throw PostgresErrors.noAnswer(what, within: error.limit, configuration)
        } catch let error as ConnectionClosed {
            throw PostgresErrors.storageFailed(what, error, configuration)
        } catch {
            throw PostgresErrors.storageFailed(what, error, configuration)
        }
    }
}

/// The first of outcomes that race, kept once; later ones are dropped. An operation and its time
/// limit (`PostgresTaskStorage.withConnection(within:on:_:)`), the change feed's first connection
/// (listening, or its error).
final class SettledOnce<T: Sendable>: Sendable {
    private let state = Mutex<(outcome: Result<T, any Error>?, waiter: CheckedContinuation<Result<T, any Error>, Never>?)>((nil, nil))

    /// Records `outcome` unless another came first; returns whether it was recorded.
    @discardableResult
    func settle(_ outcome: Result<T, any Error>) -> Bool {
        let (recorded, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Result<T, any Error>, Never>?) in
            guard state.outcome == nil else { return (false, nil) }
            state.outcome = outcome
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(returning: outcome)
        return recorded
    }

    /// The first outcome, once there is one.
    var result: Result<T, any Error> {
        get async {
            await withCheckedContinuation { waiter in
                let outcome = state.withLock { state -> Result<T, any Error>? in
                    if state.outcome == nil { state.waiter = waiter }
                    return state.outcome
                }
                if let outcome { waiter.resume(returning: outcome) }
            }
        }
    }
}

/// The server did not answer within `limit`, and the connection was closed (see
/// `PostgresTaskStorage.withConnection(within:on:_:)`).
struct NoAnswer: Error {
    let limit: Duration
}

/// The operation's connection closed before it answered (see
/// `PostgresTaskStorage.withConnection(within:on:_:)`).
struct ConnectionClosed: Error, CustomStringConvertible {
    var description: String { "the connection closed before the operation answered" }
}

/// An error thrown by the caller's own code inside a transaction, carried through the storage
/// error handling unchanged.
struct UserCodeFailed: Error {
    let error: any Error
}

extension TaskOutcome {
    var task: StoredTask {
        switch self {
        case .completed(let task), .failed(let task, _): task
        }
    }
}

extension Duration {
    /// Whole milliseconds, for interval arithmetic in SQL.
    var milliseconds: Int64 {
        let parts = components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}

extension PostgresConnection {
    /// Runs a statement and reads its result to the end (a result left unread would hold the
    /// connection's next statement back).
    func execute(_ query: PostgresQuery, logger: Logger) async throws {
        _ = try await self.query(query, logger: logger).collect()
    }
}

extension [StoredTask] {
    /// Whether the actions are in enqueue (position) order.
    var isInEnqueueOrder: Bool {
        indices.dropFirst().allSatisfy { self[$0 - 1].position < self[$0].position }
    }
}
