public import Foundation
public import QueueRetry
import Synchronization

/// What a handler reports about one action.
public enum TaskResult: Sendable, Hashable {
    /// The action is done: the broker deletes it and moves on to the next one.
    case success
    /// The action failed: the broker pauses its queue and runs the same action again after
    /// `after` (at once for `.zero` or a negative duration: to wait for a restart, as the seed's
    /// negative `retryTimeout` does, return ``waitForRestart``).
    case retry(after: Duration)
    /// The action failed: its queue stays paused, across restarts, until
    /// ``TaskQueueBroker/restartQueues(_:)`` resumes it.
    case waitForRestart
    /// The action failed and will not succeed by being run again: the broker moves it to the
    /// dead letters at once, with `reason` (``TaskDatabase/deadLetters(queueName:)``), and its queue
    /// goes on with its next action.
    case deadLetter(reason: String)

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

/// Handles the actions of the queues its broker claims, one action per queue at a time: the
/// seed's callback form.
///
/// Implement ``handleNextItem(_:completion:)``; it has no default, so a handler that does not
/// implement it (or misspells its labels) does not compile. For the `async` form, conform to
/// ``AsyncTaskQueueHandler`` instead.
///
/// ```swift
/// final class MessageHandler: TaskQueueHandler {
///     func handleNextItem(_ action: MessageSendAction, completion: @escaping @Sendable (Bool, TimeInterval) -> Void) {
///         completion(true, -1)
///     }
/// }
/// ```
///
/// A handler is `AnyObject, Sendable`: keep its mutable state in a `Mutex` (a `final class`).
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
}

/// A handler written in the `async` form, which also learns which attempt it runs. The broker
/// calls ``handle(_:context:)`` directly; ``TaskQueueHandler/handleNextItem(_:completion:)`` is
/// supplied for callers that use the seed's form.
///
/// ```swift
/// final class MessageHandler: AsyncTaskQueueHandler {
///     func handle(_ action: MessageSendAction, context: TaskContext) async -> TaskResult {
///         do { try await send(action); return .success }
///         catch { return context.retry(with: Backoff(initial: .seconds(1), maximum: .seconds(300))) }
///     }
/// }
/// ```
public protocol AsyncTaskQueueHandler<Action>: TaskQueueHandler {
    /// The action type this handler understands (restated so that `handle(_:context:)` infers it).
    associatedtype Action

    /// Handles one action, knowing which attempt it is. This is what the broker calls.
    ///
    /// The actions a broker starts together begin on one task, each running until its first
    /// suspension point and then on its own (`Task.immediate`): a handler that blocks its thread
    /// before its first `await` delays the start of the others, so move blocking work off it.
    ///
    /// - Parameters:
    ///   - action: The head of one of the broker's queues.
    ///   - context: The action's queue, identity and attempt number (1 for the first run).
    /// - Returns: What the broker does next with the action and its queue.
    func handle(_ action: Action, context: TaskContext) async -> TaskResult
}

extension AsyncTaskQueueHandler {
    /// Runs ``handle(_:context:)`` in a new task, as attempt 1 (a caller of this form has no
    /// stored attempt count; the broker does not call it), and reports its result through
    /// `completion`.
    ///
    /// - Parameters:
    ///   - action: The action to handle.
    ///   - completion: Called once with the seed's `(success, retryTimeout)` pair.
    public func handleNextItem(
        _ action: Action,
        completion: @escaping @Sendable (_ success: Bool, _ retryTimeout: TimeInterval) -> Void
    ) {
        let context = TaskContext(queueName: action.queueName, key: action.key, collection: action.collection, attempt: 1)
        Task {
            switch await self.handle(action, context: context) {
            case .success:
                completion(true, 0)
            case .retry(let after):
                let seconds = Double(after.components.seconds) + Double(after.components.attoseconds) / 1e18
                completion(false, seconds)
            case .waitForRestart, .deadLetter:
                completion(false, -1)
            }
        }
    }
}

extension TaskQueueHandler {
    /// Calls ``handleNextItem(_:completion:)`` and waits for its first completion: how the broker
    /// runs a handler that is not an ``AsyncTaskQueueHandler``.
    func handleThroughCallback(_ action: Action) async -> TaskResult {
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

extension TaskResult {
    /// A retry after the delay that `backoff` gives for the `attempt`-th failure: with the
    /// default backoff, 1 s after the first attempt failed, then 2, 4, 8 … s, capped at its maximum.
    ///
    /// - Parameters:
    ///   - backoff: QueueRetry's exponential backoff.
    ///   - attempt: The attempt that failed (``TaskContext/attempt``; 1 for the first run).
    /// - Returns: `.retry(after: backoff.delay(afterFailures: attempt))`.
    public static func retry(backoff: Backoff, attempt: Int) -> TaskResult {
        .retry(after: backoff.delay(afterFailures: attempt))
    }
}

/// What a handler knows about the action it runs, passed to ``AsyncTaskQueueHandler/handle(_:context:)``.
public struct TaskContext: Sendable, Hashable {
    /// The queue the action belongs to.
    public var queueName: String
    /// The action's key.
    public var key: String
    /// The action's collection.
    public var collection: String
    /// Which run this is: 1 for the first, 2 after one failure, and so on. Failures are stored, so
    /// the count carries across restarts; saving the action again (replacing it) starts it at 1.
    public var attempt: Int

    /// How many times the action has failed before this run (`attempt - 1`).
    public var previousFailures: Int { attempt - 1 }

    /// Creates a context (the broker creates them; tests of a handler may too).
    ///
    /// - Parameters:
    ///   - queueName: The action's queue.
    ///   - key: The action's key.
    ///   - collection: The action's collection.
    ///   - attempt: Which run this is, 1 for the first.
    public init(queueName: String, key: String, collection: String, attempt: Int) {
        self.queueName = queueName
        self.key = key
        self.collection = collection
        self.attempt = attempt
    }

    /// Answers a failure of this attempt with a retry after an exponential backoff.
    ///
    /// - Parameter backoff: QueueRetry's backoff (1 s doubling up to 1 h by default).
    /// - Returns: `.retry(after:)` with `backoff.delay(afterFailures: attempt)`.
    public func retry(with backoff: Backoff = Backoff()) -> TaskResult {
        .retry(backoff: backoff, attempt: attempt)
    }

    /// Answers a failure of this attempt with a retry after an exponential backoff with jitter.
    ///
    /// - Parameters:
    ///   - backoff: QueueRetry's backoff; its `jitter` fraction is drawn from `generator`.
    ///   - generator: The random source; inject a seeded one in tests.
    /// - Returns: `.retry(after:)` with `backoff.delay(afterFailures: attempt, using: &generator)`.
    public func retry(with backoff: Backoff, using generator: inout some RandomNumberGenerator) -> TaskResult {
        .retry(after: backoff.delay(afterFailures: attempt, using: &generator))
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
