public import Foundation

extension NewTask {
    /// Encodes an action for storage, as `TaskDatabase.save(_:)` does (for backends'
    /// own transaction types), with the current trace context.
    ///
    /// - Parameters:
    ///   - action: The action.
    ///   - encoder: The JSON encoder to use.
    ///   - notBefore: The earliest start (`nil`: at once).
    ///   - priority: Its turn among the ready queues of its broker (larger first).
    /// - Throws: ``TaskBrokerError`` with code `.encodingFailed` when the action does not encode,
    ///   `.invalidArgument` when `notBefore` is no time (its seconds are not finite).
    public init<Action: TaskQueueAction>(
        encoding action: Action, with encoder: JSONEncoder, notBefore: Date? = nil, priority: Int = 0
    ) throws {
        if let notBefore, !notBefore.timeIntervalSince1970.isFinite {
            throw TaskBrokerError(
                code: .invalidArgument,
                message: "The not-before time of action \(action.collection)/\(action.key) is \(notBefore.timeIntervalSince1970) "
                    + "seconds since 1970, which is no time; nothing was saved."
            )
        }
        let payload: Data
        do {
            payload = try encoder.encode(action)
        } catch {
            throw TaskBrokerError(
                code: .encodingFailed,
                message: "Could not encode action \(action.collection)/\(action.key) as JSON; check its Codable conformance.",
                underlying: error
            )
        }
        // The current trace context (the save's span, or the caller's) travels with the action.
        self.init(
            key: action.key, collection: action.collection, queueName: action.queueName, payload: payload,
            notBefore: notBefore, priority: priority, traceContext: TraceCarrier.current()
        )
    }
}
