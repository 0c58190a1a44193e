public import Foundation
import AsyncPrimitives
import Logging
import PostgresNIO
public import TaskBrokerCore
import Synchronization

// Held claims of plain parallel actions: a batch's rows are locked by its own transaction
// (`FOR UPDATE SKIP LOCKED`, no write), and settled in that transaction by tuple id: the completed
// deleted, the failed updated, the ones still running given ordinary leases.
extension PostgresTaskStorage: HeldParallelTaskStorage {
    /// Claims a batch under a transaction of its own on the held pool (see
    /// `HeldParallelTaskStorage.claimParallelHeld(_:limit:owner:leaseDuration:now:)`). The
    /// transaction lasts until the batch is settled or released, at most half a lease: then the
    /// server ends it (`idle_in_transaction_session_timeout`) or its time limit closes its
    /// connection, and its actions are ready again.
    public func claimParallelHeld(_ scope: TaskParallelScope, limit: Int, owner: String, leaseDuration: Duration, now: Date) async throws
        -> (any TaskParallelHeldClaims)?
    {
        guard heldBatches.open(most: Pools.heldConnections) else { return nil }
        let batch = PostgresHeldClaims()
        do {
            // Other workers learn from it when this one's actions come free if it dies: a dead
            // worker's transactions roll back at once, but nobody is told.
            try await raiseOwnerExpiry(owner)
        } catch {
            heldBatches.close()
            throw error
        }
        let lease = configuration.leaseDuration.milliseconds
        let query = sql.claimParallelHeldQuery(PostgresSchema.Scope(scope), limit: limit, now: now.timeIntervalSince1970)
        let settleLimit = configuration.leaseDuration / 2
        let started = background.run { [self] in
            defer { heldBatches.close() }
            do {
                try await withConnection(within: settleLimit, on: heldClient) { [self] connection in
                    try await Self.inTransaction(connection, logger: logger) { connection in
                        var rows: [(claim: TaskParallelClaim, tid: String)] = []
                        for try await row in try await connection.query(query, logger: logger) {
                            var cells = RowReader(row)
                            let task = try PostgresSchema.task(&cells)
                            rows.append((TaskParallelClaim(task: task, token: try cells.next(Int64.self)), try cells.next(String.self)))
                        }
                        batch.granted(rows)
                        guard !rows.isEmpty else { return }
                        guard let outcomes = await batch.instruction() else { throw HeldBatchReleased() }
                        if outcomes.count < rows.count {
                            // The rest become ordinary claims: other workers must learn when they
                            // expire. Raised in a transaction of its own, so that this one never
                            // waits for the owner's row, which a renewal of this worker can hold
                            // while it waits for a row this batch's claim kept locked (a deadlock).
                            try await raiseOwnerExpiry(owner, margin: .seconds(1))
                        }
                        // A statement written to a closed connection never answers.
                        guard !connection.isClosed else { throw ConnectionClosed() }
                        try await connection.execute(
                            sql.settleParallelQuery(outcomes, held: rows, owner: owner, leaseMilliseconds: lease), logger: logger
                        )
                    }
                }
                batch.ended(.stored)
            } catch is HeldBatchReleased {
                batch.ended(.ended("released"))
            } catch {
                let what = "hold a batch of parallel actions"
                let failure = switch error {
                case let error as TaskBrokerError: error
                case let error as NoAnswer: PostgresErrors.noAnswer(what, within: error.limit, configuration)
                default: PostgresErrors.storageFailed(what, error, configuration)
                }
                batch.failed(failure)
                batch.ended(.ended(failure.message))
            }
        }
        guard started else {
            heldBatches.close()
            throw CancellationError()
        }
        return try await withTaskCancellationHandler {
            try await batch.claimed()
        } onCancel: {
            batch.requestRelease()
        }
    }

    /// Raises `owner`'s expiry in `parallel_owner` to a lease from now, if it was last raised more
    /// than a third of a lease ago (on this machine's clock: the lease runs on the server's).
    func raiseOwnerExpiry(_ owner: String) async throws {
        let lease = configuration.leaseDuration
        guard heldBatches.shouldRaise(owner, every: lease / 3) else { return }
        do {
            try await raiseOwnerExpiry(owner, margin: .zero)
        } catch {
            heldBatches.forget(owner)
            throw error
        }
    }

    /// Raises `owner`'s expiry in `parallel_owner` to a lease and `margin` from now, in a
    /// transaction of its own (`margin` covers claims whose lease starts a moment later).
    func raiseOwnerExpiry(_ owner: String, margin: Duration) async throws {
        let milliseconds = (configuration.leaseDuration + margin).milliseconds
        try await run("record the claims of \(owner)") {
            try await committed { [self] connection in
                try await connection.execute(sql.raiseOwnerExpiryQuery(owner: owner, leaseMilliseconds: milliseconds), logger: logger)
            }
        }
    }
}

/// A batch claimed by ``PostgresTaskStorage/claimParallelHeld(_:limit:owner:leaseDuration:now:)``:
/// the task that holds its transaction waits here for the broker's settlement or release.
final class PostgresHeldClaims: TaskParallelHeldClaims {
    typealias Row = (claim: TaskParallelClaim, tid: String)

    /// The claim's rows, once it answered.
    private let rows = Mutex<[Row]>([])
    /// The claim's answer: whether it holds rows, or why it failed.
    private let answer = Deferred<TaskBrokerError?>()
    /// What the broker decided: the outcomes to store, or `nil` (release). The first decision counts.
    private let decision = Deferred<[TaskParallelOutcome]?>()
    /// How the transaction ended.
    private let ending = Deferred<TaskParallelSettlement>()

    var claims: [TaskParallelClaim] {
        rows.withLock { $0.map(\.claim) }
    }

    // MARK: The holding task's side

    /// The claim's statement answered.
    func granted(_ rows: [Row]) {
        self.rows.withLock { $0 = rows }
        _ = answer.fill(value: nil)
    }

    /// The claim failed before it answered.
    func failed(_ error: TaskBrokerError) {
        _ = answer.fill(value: error)
    }

    /// What the broker decided: the outcomes to store, or `nil` (release). Waits until it decides,
    /// or until the task is cancelled (the storage ended): a release.
    func instruction() async -> [TaskParallelOutcome]? {
        await withTaskCancellationHandler {
            await decision.value
        } onCancel: {
            requestRelease()
        }
    }

    /// The transaction ended: committed, or not.
    func ended(_ settlement: TaskParallelSettlement) {
        _ = answer.fill(value: TaskBrokerError(code: .storageFailed, message: "The claim of parallel actions was given up on."))
        _ = ending.fill(value: settlement)
    }

    // MARK: The claimer's side

    /// The batch, once the claim answered.
    func claimed() async throws -> Self {
        if let failure = await answer.value { throw failure }
        return self
    }

    func settle(_ outcomes: [TaskParallelOutcome]) async -> TaskParallelSettlement {
        _ = decision.fill(value: outcomes)
        return await ending.value
    }

    /// Asks for a release without waiting for it.
    func requestRelease() {
        _ = decision.fill(value: nil)
    }

    func release() async {
        requestRelease()
        _ = await ending.value
    }
}

/// The broker released a held batch: its transaction rolls back.
struct HeldBatchReleased: Error {}

/// How many held batches a storage has open, and when it last raised each owner's expiry.
final class HeldBatchCount: Sendable {
    private let state = Mutex<(open: Int, raised: [String: ContinuousClock.Instant])>((0, [:]))

    /// Opens one more batch unless `most` are open; returns whether it did.
    func open(most: Int) -> Bool {
        state.withLock { state in
            guard state.open < most else { return false }
            state.open += 1
            return true
        }
    }

    func close() {
        state.withLock { $0.open -= 1 }
    }

    /// Counts `owner`'s expiry not raised (raising it failed).
    func forget(_ owner: String) {
        state.withLock { _ = $0.raised.removeValue(forKey: owner) }
    }

    /// Whether `owner`'s expiry is due to be raised (and, if so, counts it raised now).
    func shouldRaise(_ owner: String, every interval: Duration) -> Bool {
        let now = ContinuousClock.now
        return state.withLock { state in
            if let last = state.raised[owner], last.duration(to: now) < interval { return false }
            state.raised[owner] = now
            return true
        }
    }
}

extension PostgresSchema {
    /// Locks up to `limit` ready actions of the scope for a held batch, and returns each with the
    /// token its claim will carry once it is settled (`token + 1`) and its tuple id.
    func claimParallelHeldQuery(_ scope: Scope, limit: Int, now: Double) -> PostgresQuery {
        """
        SELECT \(unescaped: Self.parallelColumns), token + 1, ctid::text FROM \(unescaped: parallel) p
        WHERE p.state = 0 AND p.expires_at < statement_timestamp() AND (p.not_before IS NULL OR p.not_before <= \(now)::float8)
          AND ((\(scope.byPrefix) AND starts_with(p.queue_name, \(scope.prefix)))
               OR (NOT \(scope.byPrefix) AND p.queue_name = ANY(\(scope.names)::text[])))
          AND (NOT EXISTS (SELECT 1 FROM \(unescaped: queue) WHERE paused)
               OR NOT EXISTS (SELECT 1 FROM \(unescaped: queue) q WHERE q.name = p.queue_name AND q.paused))
        ORDER BY p.priority DESC, p.position
        LIMIT \(Int64(max(1, limit)))
        FOR UPDATE OF p SKIP LOCKED
        """
    }

    /// Settles a held batch by tuple id: deletes the completed, stores the failures, and gives the
    /// rest leases of `owner`. (Its expiry is raised beforehand, outside the batch's transaction:
    /// see `raiseOwnerExpiry(_:margin:)`.)
    func settleParallelQuery(
        _ outcomes: [TaskParallelOutcome], held: [(claim: TaskParallelClaim, tid: String)], owner: String, leaseMilliseconds: Int64
    ) -> PostgresQuery {
        var tidOf: [TaskParallelClaim.ID: String] = [:]
        for row in held { tidOf[row.claim.id] = row.tid }
        var done: [String] = []
        var failed: (tids: [String], kinds: [Int16], retryAts: [Double], reasons: [String], failedAts: [Double]) = ([], [], [], [], [])
        var settled: Set<String> = []
        for outcome in outcomes {
            guard let tid = tidOf[outcome.claim.id], settled.insert(tid).inserted else { continue }
            let (kind, retryAt) = ParallelOutcomeKind.of(outcome.result)
            guard kind != ParallelOutcomeKind.completed else {
                done.append(tid)
                continue
            }
            let failure = outcome.claim.task.lastFailure
            failed.kinds.append(kind)
            failed.retryAts.append(retryAt)
            failed.tids.append(tid)
            failed.reasons.append(failure?.reason ?? "")
            failed.failedAts.append(failure?.failedAt.timeIntervalSince1970 ?? .nan)
        }
        let kept = held.map(\.tid).filter { !settled.contains($0) }
        if failed.tids.isEmpty, kept.isEmpty {
            // The usual settlement: every action of the batch completed.
            return "DELETE FROM \(unescaped: parallel) WHERE ctid = ANY(\(PostgresArray(done))::text[]::tid[])"
        }
        return """
            WITH done AS (
                DELETE FROM \(unescaped: parallel) WHERE ctid = ANY(\(PostgresArray(done))::text[]::tid[]) RETURNING 1
            ),
            failed AS (
                UPDATE \(unescaped: parallel) a SET \(unescaped: Self.failedParallelColumns)
                FROM unnest(\(PostgresArray(failed.tids))::text[], \(PostgresArray(failed.kinds))::int2[], \(PostgresArray(failed.retryAts))::float8[],
                            \(PostgresArray(failed.reasons))::text[], \(PostgresArray(failed.failedAts))::float8[]) AS i(t, kind, at, reason, fa)
                WHERE a.ctid = i.t::tid
                RETURNING 1
            ),
            kept AS (
                UPDATE \(unescaped: parallel) a SET owner = \(owner), token = a.token + 1,
                    expires_at = statement_timestamp() + \(leaseMilliseconds) * interval '1 millisecond'
                WHERE a.ctid = ANY(\(PostgresArray(kept))::text[]::tid[])
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM failed), (SELECT count(*) FROM kept)
            """
    }

    /// Raises an owner's latest claim expiry to a lease from now.
    func raiseOwnerExpiryQuery(owner: String, leaseMilliseconds: Int64) -> PostgresQuery {
        """
        INSERT INTO \(unescaped: parallelOwner) AS o (owner, expires_at)
        VALUES (\(owner), statement_timestamp() + \(leaseMilliseconds) * interval '1 millisecond')
        ON CONFLICT (owner) DO UPDATE SET expires_at = greatest(o.expires_at, excluded.expires_at)
        """
    }
}
