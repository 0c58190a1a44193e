public import Foundation

/// Which plain parallel actions a broker takes (``ParallelTaskStorage``).
public enum TaskParallelScope: Sendable, Hashable {
    /// The actions whose queue names start with this prefix (a broker set up with a name).
    case prefix(String)
    /// The actions of these queues (a broker set up with a filter, which it applied to
    /// ``ParallelTaskStorage/parallelQueueNames()``).
    case queues([String])

    /// Whether an action of this queue is in the scope.
    public func contains(_ queueName: String) -> Bool {
        switch self {
        case .prefix(let prefix): queueName.utf8.starts(with: prefix.utf8)
        case .queues(let names): names.contains(queueName)
        }
    }
}

/// A plain parallel action claimed by a broker: the action as stored and the claim's token.
///
/// Every claim of an action gets a new token; an outcome, a renewal or a release applies only
/// while the action's stored token, revision and owner are the claim's (fencing: a worker whose
/// claim expired and was taken over changes nothing).
public struct TaskParallelClaim: Sendable, Hashable {
    /// The claimed action.
    public var task: StoredTask
    /// The claim's token.
    public var token: Int64

    /// What tells one claim from another: its action's key and collection, and its token (the
    /// action's stored failure changes once it ran; the claim stays the same).
    public struct ID: Hashable, Sendable {
        /// The action's collection.
        public let collection: String
        /// The action's key.
        public let key: String
        /// The claim's token.
        public let token: Int64
    }

    /// The claim's identity.
    public var id: ID {
        ID(collection: task.collection, key: task.key, token: token)
    }

    /// Creates a claim.
    ///
    /// - Parameters:
    ///   - task: The claimed action.
    ///   - token: The claim's token.
    public init(task: StoredTask, token: Int64) {
        self.task = task
        self.token = token
    }
}

/// What became of a plain parallel action a broker ran (``ParallelTaskStorage/finishParallel(_:owner:)``).
public struct TaskParallelOutcome: Sendable, Hashable {
    /// How the run ended.
    public enum Result: Sendable, Hashable {
        /// It succeeded: delete the action.
        case completed
        /// It failed: count the attempt, store the claim's ``StoredTask/lastFailure``, and make it
        /// ready again at `retryAt` (`nil`: at once).
        case failed(retryAt: Date?)
        /// It failed for the last time: count the attempt, store the last failure and keep it as a
        /// dead letter.
        case deadLettered
        /// It waits for a restart (`TaskResult.waitForRestart`): count the attempt and hold it
        /// until a broker whose scope holds it starts (``ParallelTaskStorage/releaseHeldParallel(_:)``).
        case held
    }

    /// The claim the run was made under (its task carries the failure to store, if any).
    public var claim: TaskParallelClaim
    /// How the run ended.
    public var result: Result

    /// Creates an outcome.
    ///
    /// - Parameters:
    ///   - claim: The claim the run was made under.
    ///   - result: How the run ended.
    public init(claim: TaskParallelClaim, result: Result) {
        self.claim = claim
        self.result = result
    }
}

/// The plain parallel actions of a queue, for ``TaskDatabase/snapshot()``.
public struct TaskParallelCounts: Sendable, Hashable {
    /// Actions not yet done (ready, running, waiting for their time, held for a restart).
    public var pending: Int
    /// Dead letters.
    public var deadLetters: Int
    /// When the oldest pending action was saved.
    public var oldestSavedAt: Date?

    /// Creates counts.
    ///
    /// - Parameters:
    ///   - pending: Actions not yet done.
    ///   - deadLetters: Dead letters.
    ///   - oldestSavedAt: When the oldest pending action was saved.
    public init(pending: Int, deadLetters: Int, oldestSavedAt: Date?) {
        self.pending = pending
        self.deadLetters = deadLetters
        self.oldestSavedAt = oldestSavedAt
    }
}

/// A backend that stores plain parallel actions: actions that keep no order among themselves and
/// run side by side, each under a claim of its own (a row lease with a fencing token), instead of
/// one at a time through their queue's head.
///
/// They are kept apart from the queues' ordered actions: a broker's queue engine never reads them,
/// and a key and collection may be stored once as each kind. ``TaskStorage/delete(key:collection:)``,
/// ``TaskStorage/lookup(key:collection:)`` and the dead-letter operations cover both kinds.
public protocol ParallelTaskStorage: TaskStorage {
    /// Stores plain parallel actions in one transaction. An action whose key and collection are
    /// stored as a plain parallel action replaces it (a new revision, its claim dropped: it is
    /// ready at once, or at its not-before time, and an outcome of the replaced revision is refused).
    ///
    /// - Parameter tasks: The actions.
    /// - Returns: The stored versions, in the order given.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed` or `.invalidName`.
    func saveParallel(_ tasks: [NewTask]) async throws -> [StoredTask]

    /// Claims up to `limit` ready actions of the scope for `owner` for `leaseDuration`: larger
    /// priority first, then saved first. Ready means: not a dead letter nor held, its not-before
    /// time (if any) at or before `now`, its queue not paused by an operator, and not under a
    /// live claim. Workers claiming at once each get different actions.
    ///
    /// - Parameters:
    ///   - scope: Which actions.
    ///   - limit: The most actions claimed (at least 1).
    ///   - owner: The claiming broker.
    ///   - leaseDuration: How long each claim lasts unless renewed.
    ///   - now: The wall-clock time not-before times are compared with.
    /// - Returns: The claims.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func claimParallel(_ scope: TaskParallelScope, limit: Int, owner: String, leaseDuration: Duration, now: Date) async throws
        -> [TaskParallelClaim]

    /// Stores outcomes in one transaction. An outcome whose claim `owner` no longer holds (it
    /// expired and another worker claimed the action, or the action was deleted or replaced) is
    /// not stored.
    ///
    /// - Parameters:
    ///   - outcomes: The outcomes.
    ///   - owner: The broker that claimed the actions.
    /// - Returns: The claims whose outcomes were not stored.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed` (nothing was stored).
    func finishParallel(_ outcomes: [TaskParallelOutcome], owner: String) async throws -> [TaskParallelClaim]

    /// Extends claims whose actions still run.
    ///
    /// - Parameters:
    ///   - claims: The claims.
    ///   - owner: The broker that holds them.
    ///   - leaseDuration: How long each lasts from now.
    /// - Returns: The claims `owner` no longer holds.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func renewParallel(_ claims: [TaskParallelClaim], owner: String, leaseDuration: Duration) async throws -> [TaskParallelClaim]

    /// Lets go of claims that will not run (the broker stopped first): their actions are ready at once.
    ///
    /// - Parameters:
    ///   - claims: The claims.
    ///   - owner: The broker that holds them.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func releaseParallel(_ claims: [TaskParallelClaim], owner: String) async throws

    /// When an action of the scope that is not ready now may become ready: the earliest future
    /// not-before time, or the earliest expiry of a claim that another owner holds; `nil` when
    /// there is none.
    ///
    /// - Parameters:
    ///   - scope: Which actions.
    ///   - owner: The asking broker (its own claims are left out).
    ///   - now: The wall-clock time.
    /// - Returns: The time, on this machine's wall clock.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func nextParallelTime(_ scope: TaskParallelScope, owner: String, now: Date) async throws -> Date?

    /// The names of the queues that hold plain parallel actions, sorted (for brokers with a filter).
    ///
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func parallelQueueNames() async throws -> [String]

    /// Makes the scope's held actions (``TaskParallelOutcome/Result/held``) ready again: a broker
    /// whose scope holds them started.
    ///
    /// - Parameter scope: Which actions.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func releaseHeldParallel(_ scope: TaskParallelScope) async throws

    /// The plain parallel actions per queue that holds some.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func parallelCounts() async throws -> [String: TaskParallelCounts]

    /// Deletes a plain parallel action (cancels it; a run under way stores nothing).
    ///
    /// - Returns: The deleted action, or `nil` if none was stored.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func deleteParallel(key: String, collection: String) async throws -> StoredTask?

    /// The plain parallel action with this key and collection, live or a dead letter.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func lookupParallel(key: String, collection: String) async throws -> TaskLookup?

    /// The plain parallel actions that are dead letters, of one queue name or all, by queue name
    /// and position.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func parallelDeadLetters(queueName: String?) async throws -> [StoredTask]

    /// Makes a dead letter ready again at once: a new revision, attempts from zero, no failure.
    ///
    /// - Returns: The replayed action, or `nil` when no such dead letter is stored.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func replayParallelDeadLetter(key: String, collection: String) async throws -> StoredTask?

    /// Deletes a dead letter.
    ///
    /// - Returns: The deleted action, or `nil` when no such dead letter is stored.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed`.
    func discardParallelDeadLetter(key: String, collection: String) async throws -> StoredTask?
}
