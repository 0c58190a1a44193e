/// Something a ``TaskQueueBroker`` did, in the order it happened; read them from
/// ``TaskQueueBroker/events``. Outcomes are reported after they are committed.
public enum TaskBrokerEvent: Sendable, Hashable {
    /// The handler was given an action; `attempt` is 1 for the first run.
    case started(queueName: String, key: String, collection: String, attempt: Int)
    /// The action succeeded and was deleted.
    case succeeded(queueName: String, key: String, collection: String)
    /// The action failed; `result` says when it runs again.
    case failed(queueName: String, key: String, collection: String, result: TaskResult)
    /// The action was deleted or replaced while it ran: its outcome was ignored.
    case discarded(queueName: String, key: String, collection: String)
    /// A stored action could not be decoded as the handler's action type; its queue is paused
    /// until restarted.
    case undecodable(queueName: String, key: String, collection: String)
    /// A paused queue runs again (its timer fired or it was restarted).
    case resumed(queueName: String)
    /// The broker has stopped; no further events follow.
    case stopped
}
