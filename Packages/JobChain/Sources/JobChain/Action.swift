/// A handler for one type of event, registered process-wide with `Job.addAction(_:)`.
///
/// Posting an event (`job.postInMain(event: EventA())`) runs every registered action whose
/// event type matches, on the queue the post names. Actions are compared by identity:
/// keep the instance to remove it later with `Job.removeAction(_:)`.
///
/// ```swift
/// let action = Action { (event: EventA) in print("got", event) }
/// Job.addAction(action)
/// Job.postingInBackground(event: EventA())
/// ```
public final class Action: Sendable {
    private let handle: @Sendable (any Sendable) throws -> Void
    private let accepts: @Sendable (any Sendable) -> Bool

    /// Creates an action that handles events of type `Event` (and of its subclasses).
    ///
    /// - Parameter handler: Runs once for each posted event of type `Event`, on the queue
    ///   the post names. A thrown error fails the post command and stops the posting job.
    public init<Event: Sendable>(_ handler: @escaping @Sendable (Event) throws -> Void) {
        self.accepts = { $0 is Event }
        self.handle = { event in
            if let event = event as? Event {
                try handler(event)
            }
        }
    }

    /// Whether this action handles `event`.
    func handles(_ event: any Sendable) -> Bool {
        accepts(event)
    }

    /// Runs the handler with `event`.
    func perform(_ event: any Sendable) throws {
        try handle(event)
    }
}
