public import Foundation
import Synchronization

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
        SortProbe.current?.notedDefault.store(true, ordering: .relaxed)
        return .orderedSame
    }

    /// Whether the type orders its queues with a `sort(_:)` of its own rather than the default
    /// (enqueue order): a broker then reads such a queue whole, since any stored action may run
    /// first. Told apart by calling `sort` with a probe that only the default implementation marks.
    var ordersBySort: Bool {
        let probe = SortProbe()
        SortProbe.$current.withValue(probe) { _ = self.sort(self) }
        return !probe.notedDefault.load(ordering: .relaxed)
    }
}

/// Marked by the default `sort(_:)` when it runs inside ``TaskQueueAction/ordersBySort``.
final class SortProbe: Sendable {
    @TaskLocal static var current: SortProbe?
    let notedDefault = Atomic(false)
}
