public import Foundation

/// A backend that can claim plain parallel actions without writing them: the claimed rows stay
/// under the claim's own open transaction (row locks that other claims skip), and the batch's
/// outcomes are stored in that transaction when it is settled (``TaskParallelHeldClaims``).
///
/// A held claim costs the database what a raw `DELETE … SKIP LOCKED` loop costs per action (a lock
/// and a delete) instead of a lease written on each row and a delete found by key. Its lease is
/// the transaction: a worker that dies rolls it back, and a worker that stops answering has it
/// ended by the server. A batch is settled soon after it is claimed; what still runs then becomes
/// ordinary claims (``ParallelTaskStorage/claimParallel(_:limit:owner:leaseDuration:now:)``'s),
/// renewed and finished as those are.
public protocol HeldParallelTaskStorage: ParallelTaskStorage {
    /// Claims up to `limit` ready actions of the scope, as
    /// ``ParallelTaskStorage/claimParallel(_:limit:owner:leaseDuration:now:)`` does, but holds them
    /// under the claim's transaction instead of writing a lease on each.
    ///
    /// - Parameters:
    ///   - scope: Which actions.
    ///   - limit: The most actions claimed (at least 1).
    ///   - owner: The claiming broker.
    ///   - leaseDuration: How long the claims that are still running when the batch is settled last.
    ///   - now: The wall-clock time not-before times are compared with.
    /// - Returns: The held batch, or `nil` when the backend holds as many batches as it can: claim
    ///   with `claimParallel` instead.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func claimParallelHeld(_ scope: TaskParallelScope, limit: Int, owner: String, leaseDuration: Duration, now: Date) async throws
        -> (any TaskParallelHeldClaims)?
}

/// A batch of plain parallel actions claimed under an open transaction
/// (``HeldParallelTaskStorage/claimParallelHeld(_:limit:owner:leaseDuration:now:)``).
///
/// Settle it, or release it, once: until then its actions are claimed by no one else, and a
/// delete or save of one of them waits for it.
public protocol TaskParallelHeldClaims: Sendable {
    /// The claimed actions, larger priority first, then saved first (empty: nothing was ready, and
    /// the batch holds nothing).
    var claims: [TaskParallelClaim] { get }

    /// Stores `outcomes` (of this batch's claims), turns the batch's other claims into ordinary
    /// claims of its owner (each with its ``TaskParallelClaim/token``, for the lease asked at the
    /// claim), and commits, all in the batch's transaction.
    ///
    /// - Parameter outcomes: Outcomes of claims of this batch.
    /// - Returns: Whether it was stored.
    func settle(_ outcomes: [TaskParallelOutcome]) async -> TaskParallelSettlement

    /// Rolls the batch back: its actions are ready again at once (the broker stopped before it ran them).
    func release() async
}

/// What came of ``TaskParallelHeldClaims/settle(_:)``.
public enum TaskParallelSettlement: Sendable, Hashable {
    /// The outcomes were stored, and the batch's other claims are ordinary claims.
    case stored
    /// The batch's transaction ended before it was settled (its connection closed, or the server
    /// ended it): nothing of it was stored, its actions are ready for any worker, and its claims
    /// are lost.
    case ended(String)
}
