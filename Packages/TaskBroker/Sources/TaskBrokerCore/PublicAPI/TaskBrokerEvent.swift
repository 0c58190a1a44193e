/// Something a ``TaskQueueBroker`` did, in the order it happened; read them from
/// ``TaskQueueBroker/events``. Outcomes are reported after they are committed. To receive the
/// events of a broker from its very first action, set it up with
/// ``TaskQueueBroker/Configuration/startsAutomatically`` `false`, subscribe, then call
/// ``TaskQueueBroker/start()``.
public enum TaskBrokerEvent: Sendable, Hashable {
    /// The handler was given an action; `attempt` is 1 for the first run.
    case started(queueName: String, key: String, collection: String, attempt: Int)
    /// The action succeeded and was deleted.
    case succeeded(queueName: String, key: String, collection: String)
    /// The action failed; `result` says when it runs again.
    case failed(queueName: String, key: String, collection: String, result: TaskResult)
    /// The action failed for the last time (``TaskResult/deadLetter(reason:)``, or its
    /// ``TaskQueueBroker/Configuration/maxAttempts``-th failure) and moved to the dead letters;
    /// its queue goes on. Follows the run's ``failed(queueName:key:collection:result:)``.
    case deadLettered(queueName: String, key: String, collection: String, reason: String)
    /// The action was deleted or replaced while it ran: its outcome was ignored.
    case discarded(queueName: String, key: String, collection: String)
    /// Shared backends: another worker took the queue over while this action ran (this worker's
    /// lease expired: it was cut off from the database longer than the lease). The outcome was not
    /// stored (the lease's fencing epoch refused it) and the other worker runs the action again.
    case leaseLost(queueName: String, key: String, collection: String)
    /// A stored action could not be decoded as the handler's action type; its queue is paused
    /// until restarted.
    case undecodable(queueName: String, key: String, collection: String)
    /// An operator paused the queue (``TaskDatabase/pauseQueues(_:)``), as the broker learned when
    /// it read the queue: it starts nothing until resumed (an action it runs finishes).
    case paused(queueName: String)
    /// A paused queue runs again: its retry timer fired, or it was restarted (or its paused action
    /// was saved again), or an operator resumed it. A retry with a zero timeout (`(false, 0)`, `.retry(after: .zero)`) never
    /// pauses the queue, so it emits no `.resumed`: `.failed` is followed directly by the next
    /// `.started` of the same action.
    case resumed(queueName: String)
    /// A storage operation failed; the queues it concerns keep their place and their order and
    /// wait, and the operation is tried again after `retryIn` (a capped exponential backoff). Nothing
    /// needs a restart: ``storageRecovered(operation:queueNames:)`` follows once it succeeds.
    /// ``TaskQueueBroker/snapshot()`` shows the waiting queues' ``TaskQueueSnapshot/storageFailure``.
    case storageFailed(operation: TaskStorageOperation, queueNames: [String], message: String, retryIn: Duration)
    /// A storage operation that had failed succeeded again for these queues; they go on.
    case storageRecovered(operation: TaskStorageOperation, queueNames: [String])
    /// The broker has stopped; no further events follow.
    case stopped
}

/// The storage operations a broker retries when they fail, as ``TaskBrokerEvent/storageFailed(operation:queueNames:message:retryIn:)``
/// reports them.
public enum TaskStorageOperation: String, Sendable, Hashable, CustomStringConvertible {
    /// Reading a queue's stored actions.
    case load
    /// Claiming the heads about to run (backends shared by several processes).
    case claim
    /// Storing what became of the actions that ran.
    case store

    /// The operation's name: `load`, `claim` or `store`.
    public var description: String { rawValue }
}
