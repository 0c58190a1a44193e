public import Dispatch
public import Foundation

// The seed's commands: `doInX` adds a command to this job, the static `doingInX` creates an
// `.auto` job with it. Each comes in four shapes: a plain closure, an `async` closure, a
// closure typed by a registered target, and an event post.

extension Job {
    /// Adds a command (or a failing stand-in when `delay` is not usable) to the chain.
    func add(_ place: Place, delay seconds: TimeInterval, _ body: Body) -> Self {
        if let delay = Self.delay(seconds) {
            enqueue(Command(place: place, delay: delay, body: body))
        } else {
            let error = JobChainError(
                code: .invalidDelay,
                message: "A command's delay must be a finite number of seconds from 0 to 1e12, got \(seconds)."
            )
            enqueue(Command(place: place, delay: .zero, body: .sync { throw error }))
        }
        return self
    }

    /// A command that runs `body` once for each target of type `Target` registered now.
    static func targetBody<Target: AnyObject & Sendable>(_ body: @escaping @Sendable (Target) throws -> Void) -> Body {
        let targets = Registry.shared.targets(of: Target.self)
        return .sync {
            for target in targets {
                if let target = target.object as? Target {
                    try body(target)
                }
            }
        }
    }

    /// A command that hands `event` to each action registered for it now.
    static func eventBody<Event: Sendable>(_ event: Event) -> Body {
        let actions = Registry.shared.actions(for: event)
        return .sync {
            for action in actions {
                try action.perform(event)
            }
        }
    }

    // MARK: - Background

    /// Runs `command` on a thread of the global queue with `DispatchQoS.QoSClass.background` priority.
    ///
    /// A thrown error stops the job and keeps the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The work.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInBackground(delay: TimeInterval = 0, _ command: @escaping @Sendable () throws -> Void) -> Self {
        add(.global(.background), delay: delay, .sync(command))
    }

    /// Creates an `.auto` job whose first command runs `command` on a thread of the global queue with `DispatchQoS.QoSClass.background` priority.
    ///
    /// A thrown error stops the job and keeps the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The work.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInBackground(delay: TimeInterval = 0, _ command: @escaping @Sendable () throws -> Void) -> Job {
        Job(mode: .auto).doInBackground(delay: delay, command)
    }

    /// Runs the `async` `command`, started from a thread of the global queue with `DispatchQoS.QoSClass.background` priority.
    ///
    /// The next command starts when `command` returns. A thrown error stops the job and keeps
    /// the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The async work.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInBackground(delay: TimeInterval = 0, _ command: @escaping @Sendable () async throws -> Void) -> Self {
        add(.global(.background), delay: delay, .async(command))
    }

    /// Creates an `.auto` job whose first command runs the `async` `command`, started from a thread of the global queue with `DispatchQoS.QoSClass.background` priority.
    ///
    /// The next command starts when `command` returns. A thrown error stops the job and keeps
    /// the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The async work.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInBackground(delay: TimeInterval = 0, _ command: @escaping @Sendable () async throws -> Void) -> Job {
        Job(mode: .auto).doInBackground(delay: delay, command)
    }

    /// Runs `command` with each registered target of type `Target`, on a thread of the global queue with `DispatchQoS.QoSClass.background` priority.
    ///
    /// The targets are those registered with ``Job/addTarget(_:)`` when the command is added,
    /// held weakly: a target freed before the command runs is skipped, and with no target
    /// the command does nothing.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The work, given one target.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInBackground<Target: AnyObject & Sendable>(delay: TimeInterval = 0, _ command: @escaping @Sendable (Target) throws -> Void) -> Self {
        add(.global(.background), delay: delay, Self.targetBody(command))
    }

    /// Creates an `.auto` job whose first command runs `command` with each registered target of type `Target`, on a thread of the global queue with `DispatchQoS.QoSClass.background` priority.
    ///
    /// The targets are those registered with ``Job/addTarget(_:)`` when the command is added,
    /// held weakly: a target freed before the command runs is skipped, and with no target
    /// the command does nothing.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The work, given one target.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInBackground<Target: AnyObject & Sendable>(delay: TimeInterval = 0, _ command: @escaping @Sendable (Target) throws -> Void) -> Job {
        Job(mode: .auto).doInBackground(delay: delay, command)
    }

    /// Posts `event` on a thread of the global queue with `DispatchQoS.QoSClass.background` priority: every action registered for its type runs.
    ///
    /// The actions are those registered with ``Job/addAction(_:)`` when the post is added.
    /// An action that throws stops the job, as a failed command does.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - event: The event handed to each action.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func postInBackground<Event: Sendable>(delay: TimeInterval = 0, event: Event) -> Self {
        add(.global(.background), delay: delay, Self.eventBody(event))
    }

    /// Creates an `.auto` job whose first command posts `event` on a thread of the global queue with `DispatchQoS.QoSClass.background` priority.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the post (default 0).
    ///   - event: The event handed to each action registered for its type.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func postingInBackground<Event: Sendable>(delay: TimeInterval = 0, event: Event) -> Job {
        Job(mode: .auto).postInBackground(delay: delay, event: event)
    }

    // MARK: - Utility

    /// Runs `command` on a thread of the global queue with `DispatchQoS.QoSClass.utility` priority.
    ///
    /// A thrown error stops the job and keeps the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The work.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInUtility(delay: TimeInterval = 0, _ command: @escaping @Sendable () throws -> Void) -> Self {
        add(.global(.utility), delay: delay, .sync(command))
    }

    /// Creates an `.auto` job whose first command runs `command` on a thread of the global queue with `DispatchQoS.QoSClass.utility` priority.
    ///
    /// A thrown error stops the job and keeps the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The work.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInUtility(delay: TimeInterval = 0, _ command: @escaping @Sendable () throws -> Void) -> Job {
        Job(mode: .auto).doInUtility(delay: delay, command)
    }

    /// Runs the `async` `command`, started from a thread of the global queue with `DispatchQoS.QoSClass.utility` priority.
    ///
    /// The next command starts when `command` returns. A thrown error stops the job and keeps
    /// the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The async work.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInUtility(delay: TimeInterval = 0, _ command: @escaping @Sendable () async throws -> Void) -> Self {
        add(.global(.utility), delay: delay, .async(command))
    }

    /// Creates an `.auto` job whose first command runs the `async` `command`, started from a thread of the global queue with `DispatchQoS.QoSClass.utility` priority.
    ///
    /// The next command starts when `command` returns. A thrown error stops the job and keeps
    /// the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The async work.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInUtility(delay: TimeInterval = 0, _ command: @escaping @Sendable () async throws -> Void) -> Job {
        Job(mode: .auto).doInUtility(delay: delay, command)
    }

    /// Runs `command` with each registered target of type `Target`, on a thread of the global queue with `DispatchQoS.QoSClass.utility` priority.
    ///
    /// The targets are those registered with ``Job/addTarget(_:)`` when the command is added,
    /// held weakly: a target freed before the command runs is skipped, and with no target
    /// the command does nothing.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The work, given one target.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInUtility<Target: AnyObject & Sendable>(delay: TimeInterval = 0, _ command: @escaping @Sendable (Target) throws -> Void) -> Self {
        add(.global(.utility), delay: delay, Self.targetBody(command))
    }

    /// Creates an `.auto` job whose first command runs `command` with each registered target of type `Target`, on a thread of the global queue with `DispatchQoS.QoSClass.utility` priority.
    ///
    /// The targets are those registered with ``Job/addTarget(_:)`` when the command is added,
    /// held weakly: a target freed before the command runs is skipped, and with no target
    /// the command does nothing.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The work, given one target.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInUtility<Target: AnyObject & Sendable>(delay: TimeInterval = 0, _ command: @escaping @Sendable (Target) throws -> Void) -> Job {
        Job(mode: .auto).doInUtility(delay: delay, command)
    }

    /// Posts `event` on a thread of the global queue with `DispatchQoS.QoSClass.utility` priority: every action registered for its type runs.
    ///
    /// The actions are those registered with ``Job/addAction(_:)`` when the post is added.
    /// An action that throws stops the job, as a failed command does.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - event: The event handed to each action.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func postInUtility<Event: Sendable>(delay: TimeInterval = 0, event: Event) -> Self {
        add(.global(.utility), delay: delay, Self.eventBody(event))
    }

    /// Creates an `.auto` job whose first command posts `event` on a thread of the global queue with `DispatchQoS.QoSClass.utility` priority.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the post (default 0).
    ///   - event: The event handed to each action registered for its type.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func postingInUtility<Event: Sendable>(delay: TimeInterval = 0, event: Event) -> Job {
        Job(mode: .auto).postInUtility(delay: delay, event: event)
    }

    // MARK: - Main

    /// Runs `command` on the main queue (`DispatchQueue.main`).
    ///
    /// A thrown error stops the job and keeps the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The work.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInMain(delay: TimeInterval = 0, _ command: @escaping @Sendable () throws -> Void) -> Self {
        add(.main, delay: delay, .sync(command))
    }

    /// Creates an `.auto` job whose first command runs `command` on the main queue (`DispatchQueue.main`).
    ///
    /// A thrown error stops the job and keeps the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The work.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInMain(delay: TimeInterval = 0, _ command: @escaping @Sendable () throws -> Void) -> Job {
        Job(mode: .auto).doInMain(delay: delay, command)
    }

    /// Runs the `async` `command`, started from the main queue (`DispatchQueue.main`).
    ///
    /// The next command starts when `command` returns. A thrown error stops the job and keeps
    /// the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The async work.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInMain(delay: TimeInterval = 0, _ command: @escaping @Sendable () async throws -> Void) -> Self {
        add(.main, delay: delay, .async(command))
    }

    /// Creates an `.auto` job whose first command runs the `async` `command`, started from the main queue (`DispatchQueue.main`).
    ///
    /// The next command starts when `command` returns. A thrown error stops the job and keeps
    /// the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The async work.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInMain(delay: TimeInterval = 0, _ command: @escaping @Sendable () async throws -> Void) -> Job {
        Job(mode: .auto).doInMain(delay: delay, command)
    }

    /// Runs `command` with each registered target of type `Target`, on the main queue (`DispatchQueue.main`).
    ///
    /// The targets are those registered with ``Job/addTarget(_:)`` when the command is added,
    /// held weakly: a target freed before the command runs is skipped, and with no target
    /// the command does nothing.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The work, given one target.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInMain<Target: AnyObject & Sendable>(delay: TimeInterval = 0, _ command: @escaping @Sendable (Target) throws -> Void) -> Self {
        add(.main, delay: delay, Self.targetBody(command))
    }

    /// Creates an `.auto` job whose first command runs `command` with each registered target of type `Target`, on the main queue (`DispatchQueue.main`).
    ///
    /// The targets are those registered with ``Job/addTarget(_:)`` when the command is added,
    /// held weakly: a target freed before the command runs is skipped, and with no target
    /// the command does nothing.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The work, given one target.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInMain<Target: AnyObject & Sendable>(delay: TimeInterval = 0, _ command: @escaping @Sendable (Target) throws -> Void) -> Job {
        Job(mode: .auto).doInMain(delay: delay, command)
    }

    /// Posts `event` on the main queue (`DispatchQueue.main`): every action registered for its type runs.
    ///
    /// The actions are those registered with ``Job/addAction(_:)`` when the post is added.
    /// An action that throws stops the job, as a failed command does.
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - event: The event handed to each action.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func postInMain<Event: Sendable>(delay: TimeInterval = 0, event: Event) -> Self {
        add(.main, delay: delay, Self.eventBody(event))
    }

    /// Creates an `.auto` job whose first command posts `event` on the main queue (`DispatchQueue.main`).
    ///
    /// - Parameters:
    ///   - delay: Seconds to wait before the post (default 0).
    ///   - event: The event handed to each action registered for its type.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func postingInMain<Event: Sendable>(delay: TimeInterval = 0, event: Event) -> Job {
        Job(mode: .auto).postInMain(delay: delay, event: event)
    }

    // MARK: - Custom

    /// Runs `command` on the custom queue tagged `tag` (see ``Job/addQueue(tag:priority:)``).
    ///
    /// A thrown error stops the job and keeps the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - tag: The custom queue's tag. An unknown tag fails the command with
    ///     ``JobChainError/Code/unknownQueue`` when its turn comes.
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The work.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInCustom(_ tag: String, delay: TimeInterval = 0, _ command: @escaping @Sendable () throws -> Void) -> Self {
        add(.custom(tag), delay: delay, .sync(command))
    }

    /// Creates an `.auto` job whose first command runs `command` on the custom queue tagged `tag` (see ``Job/addQueue(tag:priority:)``).
    ///
    /// A thrown error stops the job and keeps the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - tag: The custom queue's tag. An unknown tag fails the command with
    ///     ``JobChainError/Code/unknownQueue`` when its turn comes.
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The work.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInCustom(_ tag: String, delay: TimeInterval = 0, _ command: @escaping @Sendable () throws -> Void) -> Job {
        Job(mode: .auto).doInCustom(tag, delay: delay, command)
    }

    /// Runs the `async` `command`, started from the custom queue tagged `tag` (see ``Job/addQueue(tag:priority:)``).
    ///
    /// The next command starts when `command` returns. A thrown error stops the job and keeps
    /// the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - tag: The custom queue's tag. An unknown tag fails the command with
    ///     ``JobChainError/Code/unknownQueue`` when its turn comes.
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The async work.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInCustom(_ tag: String, delay: TimeInterval = 0, _ command: @escaping @Sendable () async throws -> Void) -> Self {
        add(.custom(tag), delay: delay, .async(command))
    }

    /// Creates an `.auto` job whose first command runs the `async` `command`, started from the custom queue tagged `tag` (see ``Job/addQueue(tag:priority:)``).
    ///
    /// The next command starts when `command` returns. A thrown error stops the job and keeps
    /// the command first, so ``resume()`` retries it.
    ///
    /// - Parameters:
    ///   - tag: The custom queue's tag. An unknown tag fails the command with
    ///     ``JobChainError/Code/unknownQueue`` when its turn comes.
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The async work.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInCustom(_ tag: String, delay: TimeInterval = 0, _ command: @escaping @Sendable () async throws -> Void) -> Job {
        Job(mode: .auto).doInCustom(tag, delay: delay, command)
    }

    /// Runs `command` with each registered target of type `Target`, on the custom queue tagged `tag` (see ``Job/addQueue(tag:priority:)``).
    ///
    /// The targets are those registered with ``Job/addTarget(_:)`` when the command is added,
    /// held weakly: a target freed before the command runs is skipped, and with no target
    /// the command does nothing.
    ///
    /// - Parameters:
    ///   - tag: The custom queue's tag. An unknown tag fails the command with
    ///     ``JobChainError/Code/unknownQueue`` when its turn comes.
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - command: The work, given one target.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func doInCustom<Target: AnyObject & Sendable>(_ tag: String, delay: TimeInterval = 0, _ command: @escaping @Sendable (Target) throws -> Void) -> Self {
        add(.custom(tag), delay: delay, Self.targetBody(command))
    }

    /// Creates an `.auto` job whose first command runs `command` with each registered target of type `Target`, on the custom queue tagged `tag` (see ``Job/addQueue(tag:priority:)``).
    ///
    /// The targets are those registered with ``Job/addTarget(_:)`` when the command is added,
    /// held weakly: a target freed before the command runs is skipped, and with no target
    /// the command does nothing.
    ///
    /// - Parameters:
    ///   - tag: The custom queue's tag. An unknown tag fails the command with
    ///     ``JobChainError/Code/unknownQueue`` when its turn comes.
    ///   - delay: Seconds to wait before the command runs (default 0).
    ///   - command: The work, given one target.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func doingInCustom<Target: AnyObject & Sendable>(_ tag: String, delay: TimeInterval = 0, _ command: @escaping @Sendable (Target) throws -> Void) -> Job {
        Job(mode: .auto).doInCustom(tag, delay: delay, command)
    }

    /// Posts `event` on the custom queue tagged `tag` (see ``Job/addQueue(tag:priority:)``): every action registered for its type runs.
    ///
    /// The actions are those registered with ``Job/addAction(_:)`` when the post is added.
    /// An action that throws stops the job, as a failed command does.
    ///
    /// - Parameters:
    ///   - tag: The custom queue's tag. An unknown tag fails the command with
    ///     ``JobChainError/Code/unknownQueue`` when its turn comes.
    ///   - delay: Seconds to wait after the previous command finished (default 0).
    ///   - event: The event handed to each action.
    /// - Returns: This job, to chain more commands.
    @discardableResult
    public func postInCustom<Event: Sendable>(_ tag: String, delay: TimeInterval = 0, event: Event) -> Self {
        add(.custom(tag), delay: delay, Self.eventBody(event))
    }

    /// Creates an `.auto` job whose first command posts `event` on the custom queue tagged `tag` (see ``Job/addQueue(tag:priority:)``).
    ///
    /// - Parameters:
    ///   - tag: The custom queue's tag. An unknown tag fails the command with
    ///     ``JobChainError/Code/unknownQueue`` when its turn comes.
    ///   - delay: Seconds to wait before the post (default 0).
    ///   - event: The event handed to each action registered for its type.
    /// - Returns: The new job, to chain more commands.
    @discardableResult
    public static func postingInCustom<Event: Sendable>(_ tag: String, delay: TimeInterval = 0, event: Event) -> Job {
        Job(mode: .auto).postInCustom(tag, delay: delay, event: event)
    }

    // MARK: - Registrations

    /// Adds a custom serial queue that every job can use with `doInCustom(tag)`.
    ///
    /// Commands on one tag run one at a time in submission order, whichever jobs they
    /// belong to.
    ///
    /// - Parameters:
    ///   - tag: The queue's name.
    ///   - priority: The priority its commands run with.
    /// - Returns: `false` (and nothing changes) when a queue with this tag already exists.
    @discardableResult
    public static func addQueue(tag: String, priority: DispatchQoS.QoSClass) -> Bool {
        Registry.shared.addQueue(tag: tag, priority: priority)
    }

    /// Removes a custom queue. Commands already handed to it still run; later commands on
    /// the tag fail with ``JobChainError/Code/unknownQueue``.
    ///
    /// - Parameter tag: The queue's name.
    /// - Returns: Whether a queue with this tag existed.
    @discardableResult
    public static func removeQueue(tag: String) -> Bool {
        Registry.shared.removeQueue(tag: tag)
    }

    /// Registers a target for commands typed by its type (`doInMain { (target: TargetA) in … }`).
    ///
    /// The target is held weakly; adding it twice keeps one registration.
    ///
    /// - Parameter target: The object commands may act on.
    public static func addTarget(_ target: some AnyObject & Sendable) {
        Registry.shared.addTarget(target)
    }

    /// Unregisters a target: commands added from now on no longer run with it.
    ///
    /// - Parameter target: The object to forget.
    public static func removeTarget(_ target: some AnyObject & Sendable) {
        Registry.shared.removeTarget(target)
    }

    /// Registers an action: posts of its event type added from now on run it.
    ///
    /// - Parameter action: The action; keep it to remove it later.
    public static func addAction(_ action: Action) {
        Registry.shared.addAction(action)
    }

    /// Unregisters an action: posts added from now on no longer run it.
    ///
    /// - Parameter action: The instance given to ``addAction(_:)``.
    public static func removeAction(_ action: Action) {
        Registry.shared.removeAction(action)
    }
}
