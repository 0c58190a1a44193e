public import Foundation

/// The state of one queue, as ``TaskDatabase/snapshot()`` and ``TaskQueueBroker/snapshot()`` report it.
public struct TaskQueueSnapshot: Sendable, Hashable {
    /// The queue's name.
    public var name: String
    /// How many actions are stored in the queue, including one in flight.
    public var pending: Int
    /// The key of the action a broker of this process is running, if any (a database snapshot
    /// does not know and reports `nil`).
    public var inFlight: String?
    /// Why the queue is paused, if it is.
    public var pause: TaskPause?
    /// How many times the queue's head (its paused action, if any) has failed.
    public var attempts: Int
    /// Why the queue waits on storage, when a broker could not read it, claim its head or store
    /// its outcome and is about to try again (`nil` when storage works). A database snapshot does
    /// not know and reports `nil`; ask ``TaskQueueBroker/snapshot()``.
    public var storageFailure: String?
    /// The last failed run of the queue's head (its paused action, if any), if it failed since it
    /// was saved.
    public var lastFailure: TaskFailure?
    /// How many of the queue's actions are dead letters (failed for the last time; not counted in
    /// ``pending``).
    public var deadLetters: Int
    /// Whether an operator paused the queue (``TaskDatabase/pauseQueues(_:)``); a failure's pause
    /// is ``pause``.
    public var pausedByOperator: Bool
    /// When the longest-waiting of the queue's pending actions was saved (a replacement keeps the
    /// time of the save it replaced): how long the queue has kept work waiting. `nil` for a queue
    /// with no pending action, or whose actions were all saved before the schema recorded it.
    public var oldestSavedAt: Date?
    /// How many plain parallel actions (`TaskDatabase.saveParallel(_:notBefore:priority:)`) with
    /// this queue name are stored and not dead letters: ready, running, waiting for their time or
    /// for a retry. Not counted in ``pending``; their dead letters are in ``deadLetters``.
    public var parallelPending = 0

    /// The wall-clock time a timed retry is due, or `nil` when not paused on a timer.
    public var pausedUntil: Date? {
        if case .until(let date) = pause { return date }
        return nil
    }

    /// Creates a queue snapshot.
    ///
    /// - Parameters:
    ///   - name: The queue's name.
    ///   - pending: The number of stored actions.
    ///   - inFlight: The key of the running action, if known.
    ///   - pause: Why the queue is paused, if it is.
    ///   - attempts: The failures of the queue's head.
    ///   - storageFailure: Why the queue waits on storage, if it does.
    ///   - lastFailure: The last failed run of the queue's head.
    ///   - deadLetters: How many of the queue's actions are dead letters.
    ///   - pausedByOperator: Whether an operator paused the queue.
    ///   - oldestSavedAt: When its longest-waiting pending action was saved.
    public init(
        name: String, pending: Int, inFlight: String? = nil, pause: TaskPause? = nil, attempts: Int = 0,
        storageFailure: String? = nil, lastFailure: TaskFailure? = nil, deadLetters: Int = 0, pausedByOperator: Bool = false,
        oldestSavedAt: Date? = nil
    ) {
        self.name = name
        self.pending = pending
        self.inFlight = inFlight
        self.pause = pause
        self.attempts = attempts
        self.storageFailure = storageFailure
        self.lastFailure = lastFailure
        self.deadLetters = deadLetters
        self.pausedByOperator = pausedByOperator
        self.oldestSavedAt = oldestSavedAt
    }
}
