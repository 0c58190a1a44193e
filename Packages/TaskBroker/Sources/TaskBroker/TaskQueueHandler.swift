public import Foundation
import Synchronization

/// What a handler reports about one action.
public enum TaskResult: Sendable, Hashable {
    /// The action is done: the broker deletes it and moves on to the next one.
    case success
    /// The action failed: the broker pauses its queue and runs the same action again after
    /// `after` (at once for `.zero`).
    case retry(after: Duration)
    /// The action failed: its queue stays paused, across restarts, until
    /// ``TaskQueueBroker/restartQueues(_:)`` resumes it.
    case waitForRestart

    /// Translates the seed's `(success, retryTimeout)` pair.
    ///
    /// - Parameters:
    ///   - success: Whether the action succeeded; `retryTimeout` is ignored when it did.
    ///   - retryTimeout: Seconds before a retry; `0` retries at once, a negative value (or NaN)
    ///     waits for ``TaskQueueBroker/restartQueues(_:)``.
    public init(success: Bool, retryTimeout: TimeInterval) {
        if success {
            self = .success
        } else if retryTimeout.isNaN || retryTimeout < 0 {
            self = .waitForRestart
        } else if retryTimeout.isInfinite {
            self = .waitForRestart
        } else {
            // Capped at about 100 years so that the conversion cannot overflow.
            let seconds = min(retryTimeout, 3_153_600_000)
            self = .retry(after: .nanoseconds(Int64((seconds * 1e9).rounded())))
        }
    }
}

/// Handles the actions of the queues its broker claims, one action per queue at a time.
///
/// Implement either the seed's callback form ``handleNextItem(_:completion:)`` or the
/// `async` form ``handle(_:)``: each has a default that calls the other. (Implementing
/// neither recurses forever.)
///
/// ```swift
/// final class MessageHandler: TaskQueueHandler {
///     func handle(_ action: MessageSendAction) async -> TaskResult { .success }
/// }
/// ```
public protocol TaskQueueHandler<Action>: AnyObject, Sendable {
    /// The action type this handler understands.
    associatedtype Action: TaskQueueAction

    /// Handles one action and reports the outcome once through `completion`.
    ///
    /// - Parameters:
    ///   - action: The head of one of the broker's queues.
    ///   - completion: Call once with `(true, _)` on success, `(false, t)` to retry after `t`
    ///     seconds (`0`: at once) or `(false, -1)` to pause the queue until it is restarted.
    ///     Later calls are ignored.
    func handleNextItem(
        _ action: Action,
        completion: @escaping @Sendable (_ success: Bool, _ retryTimeout: TimeInterval) -> Void
    )

    /// Handles one action.
    ///
    /// - Parameter action: The head of one of the broker's queues.
    /// - Returns: What the broker does next with the action and its queue.
    func handle(_ action: Action) async -> TaskResult
}

extension TaskQueueHandler {
    /// Runs ``handle(_:)`` in a new task and reports its result through `completion`.
    ///
    /// - Parameters:
    ///   - action: The head of one of the broker's queues.
    ///   - completion: Called once with the seed's `(success, retryTimeout)` pair.
    public func handleNextItem(
        _ action: Action,
        completion: @escaping @Sendable (_ success: Bool, _ retryTimeout: TimeInterval) -> Void
    ) {
        Task {
            switch await self.handle(action) {
            case .success:
                completion(true, 0)
            case .retry(let after):
                let seconds = Double(after.components.seconds) + Double(after.components.attoseconds) / 1e18
                completion(false, seconds)
            case .waitForRestart:
                completion(false, -1)
            }
        }
    }

    /// Calls ``handleNextItem(_:completion:)`` and waits for its first completion.
    ///
    /// - Parameter action: The head of one of the broker's queues.
    /// - Returns: The translated `(success, retryTimeout)` pair.
    public func handle(_ action: Action) async -> TaskResult {
        await withCheckedContinuation { (continuation: CheckedContinuation<TaskResult, Never>) in
            let once = OnceFlag()
            self.handleNextItem(action) { success, retryTimeout in
                if once.take() {
                    continuation.resume(returning: TaskResult(success: success, retryTimeout: retryTimeout))
                }
            }
        }
    }
}

/// A flag that lets exactly one caller through.
final class OnceFlag: Sendable {
    private let taken = Mutex(false)

    /// Returns `true` to the first caller only.
    func take() -> Bool {
        taken.withLock { taken in
            defer { taken = true }
            return !taken
        }
    }
}
