public import Foundation

/// A unit of work stored in a ``TaskDatabase`` and run by the ``TaskQueueBroker`` that claims its queue.
///
/// An action holds only what its handler needs to know what to do (YapTaskQueue's advice still
/// holds: store the key of a message, not the message). The seed's methods become properties:
///
/// | YapTaskQueue           | TaskBroker          |
/// |------------------------|---------------------|
/// | `func yapKey()`        | `var key`           |
/// | `func yapCollection()` | `var collection`    |
/// | `func queueName()`     | `var queueName`     |
/// | `func sort(otherObject:)` | `func sort(_:)`  |
///
/// `key` and `collection` identify the action: saving another action with the same pair
/// replaces it. Actions are stored as JSON through `Codable`.
public protocol TaskQueueAction: Codable, Sendable {
    /// The action's key, unique within its ``collection``.
    var key: String { get }
    /// The collection the action belongs to.
    var collection: String { get }
    /// The name of the queue that runs this action; the broker whose name is a prefix of it
    /// (or whose filter accepts it) runs it.
    var queueName: String { get }

    /// Orders two actions of the same queue: the queue runs its smallest action first.
    ///
    /// Actions that compare `.orderedSame` run in the order they were saved.
    ///
    /// - Parameter other: Another action of the same queue.
    /// - Returns: `.orderedAscending` if `self` should run before `other`.
    func sort(_ other: Self) -> ComparisonResult
}

extension TaskQueueAction {
    /// The default order: the order in which actions were saved.
    ///
    /// - Parameter other: Another action of the same queue.
    /// - Returns: `.orderedSame`, so that the enqueue order decides.
    public func sort(_ other: Self) -> ComparisonResult {
        .orderedSame
    }
}
