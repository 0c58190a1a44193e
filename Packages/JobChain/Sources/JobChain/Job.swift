import Dispatch
public import Foundation
import Synchronization

/// A chain of commands that run one after another, each on the queue it names.
///
/// Add commands with `doInBackground`, `doInUtility`, `doInMain` or `doInCustom` (or the
/// static `Job.doingInBackground` and friends, which create an `.auto` job); every command
/// returns the job, so chains compose. A command starts only after the previous one has
/// finished, even when the two run on different queues, and `delay:` counts from that moment.
///
/// ```swift
/// let job = Job.doingInBackground {
///     // action 1, on a background thread
/// }.doInMain {
///     // action 2, on the main queue, after action 1
/// }
/// try await job.idle()
/// ```
///
/// A job has a lifecycle (``State``): a command that throws stops the job, stays first in
/// the chain and is retried by ``resume()``; ``suspend()`` stops it after the running
/// command; ``cancel()`` drops what has not started. Subclasses override the lifecycle
/// callbacks (``willStart()`` … ``willEject()``). No lock is held while a command or a
/// callback runs.
///
/// A job is `Sendable`: use it from any thread. It keeps itself alive while it has work in
/// flight, so a chain whose result is ignored (`Job.doingInBackground { … }`) runs to its
/// end and is then freed (``willEject()`` runs).
// `Job` is `open` so that subclasses can override the lifecycle callbacks (the seed's
// `MyJob`), and a non-final class cannot be checked `Sendable`. It is safe: every stored
// property is a `let` of a `Sendable` type and all mutable state lives in `core`, behind a lock;
// a subclass that adds mutable state must protect it the same way.
open class Job: @unchecked Sendable {
    /// How a new job treats the commands added to it.
    public enum Mode: Sendable, Equatable {
        /// The job starts as ``State/paused``: adding a command launches it at once.
        case auto
        /// The job starts as ``State/stopped``: commands wait for ``Job/resume()``.
        case manual
    }

    /// Where a job is in its lifecycle.
    public enum State: Sendable, Equatable, CustomStringConvertible {
        /// Not alive: the state before creation and after the job is freed.
        case ejected
        /// Idle: no command is running and a new command starts at once.
        case paused
        /// Halted: by ``Job/Mode/manual``, by ``Job/suspend()`` or by a failed command;
        /// commands wait for ``Job/resume()``.
        case stopped
        /// Running the first command of its chain (or waiting for its `delay:`).
        case started
        /// The first command succeeded and was removed; the job picks the next one.
        case finished
        /// ``Job/suspend()`` was called while a command ran; the job stops when it ends.
        case interrupted

        /// The state's name.
        public var description: String {
            switch self {
            case .ejected: "ejected"
            case .paused: "paused"
            case .stopped: "stopped"
            case .started: "started"
            case .finished: "finished"
            case .interrupted: "interrupted"
            }
        }
    }

    enum Callback: Sendable {
        case willStart, didStart, didFinish, willPause, didPause, didInterrupt, willStop, didStop
    }

    /// Something to do outside the lock, in the order the state machine decided it.
    enum Step: Sendable {
        case callback(Callback)
        case publish(State)
        case execute(Execution)
    }

    enum Phase: Sendable {
        case none
        case delaying(UInt64)
        /// A custom-tag command handed to its tag's queue, which still runs another job's
        /// command: not started yet, so `cancel()` drops it and `suspend()` stops before it.
        case waitingForLane(UInt64)
        case running

        /// The phase of `command` once its delay (if any) has passed: waiting for its custom tag,
        /// or running.
        static func due(_ command: Command, attempt: UInt64) -> Phase {
            command.isCustom ? .waitingForLane(attempt) : .running
        }
    }

    /// Where the delivering thread is: a worker that may run the next sync command inline.
    enum Context: Sendable {
        case caller
        case worker(DispatchQoS.QoSClass)
    }

    struct Waiter: Sendable {
        let id: UInt64
        let resume: @Sendable (_ timedOut: Bool) -> Void
    }

    struct Core: Sendable {
        /// The state decisions are based on.
        var state: State
        var commands = CommandList()
        var mainPending = 0
        /// A command is running or waiting for its delay: the job is not at rest.
        var driving = false
        var phase = Phase.none
        var attempt: UInt64 = 0
        var delayTimer: JobTimer.Handle?
        var error: (any Error)?
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        var cancelledWaiters: Set<UInt64> = []
        var steps: [Step] = []
        var delivering = false

        /// No command is running or waiting, and every step (state, callbacks) is delivered:
        /// what `await()` and `idle()` wait for, so that a caller who sees the job at rest also
        /// sees its final state and its callbacks done.
        var isAtRest: Bool { !driving && !delivering }
    }

    let core: Locked<Core>
    /// The state readers see (``State/code``); it follows `core.state` in callback order.
    let published: Atomic<UInt8>
    let timer: JobTimer

    /// Creates a job.
    ///
    /// - Parameters:
    ///   - mode: `.auto` (the default) starts commands as they are added; `.manual` waits
    ///     for ``resume()``.
    ///   - clock: The clock that `delay:` and the timeouts of ``await(_:)`` count on.
    ///     Tests pass a manual clock.
    public init(mode: Mode = .auto, clock: some Clock<Duration> = ContinuousClock()) {
        let initial: State = mode == .auto ? .paused : .stopped
        self.core = Locked(Core(state: initial))
        self.published = Atomic(initial.code)
        self.timer = JobTimer(clock: clock)
    }

    deinit {
        core.withLock { $0.state = .ejected }
        published.store(State.ejected.code, ordering: .releasing)
        willEject()
    }

    // MARK: - State

    /// The job's current lifecycle state.
    public var state: State {
        State(code: published.load(ordering: .acquiring))
    }

    /// The error of the command that stopped the job, or `nil`.
    ///
    /// It stays until ``resume()`` retries the command.
    ///
    /// - Returns: The error thrown by the failed command (a ``JobChainError`` when the job
    ///   itself could not run it, an unknown queue tag say), or `nil`.
    public func error() -> (any Error)? {
        core.withLock { $0.error }
    }

    // MARK: - Lifecycle callbacks

    /// Called before the job starts its first pending command. Does nothing unless overridden.
    open func willStart() {}
    /// Called after the job moved to ``State/started``, before the command runs.
    open func didStart() {}
    /// Called after a command succeeded and was removed from the chain.
    open func didFinish() {}
    /// Called when the chain has run out of commands, before the job moves to ``State/paused``.
    open func willPause() {}
    /// Called after the job moved to ``State/paused``.
    open func didPause() {}
    /// Called after ``suspend()`` interrupted a running command; the job stops when it ends.
    open func didInterrupt() {}
    /// Called before the job moves to ``State/stopped`` (suspended, or a command failed).
    open func willStop() {}
    /// Called after the job moved to ``State/stopped``.
    open func didStop() {}
    /// Called when the job is being freed: nothing references it and no work is in flight.
    ///
    /// It runs during deinitialization: do not keep a reference to the job.
    open func willEject() {}

    // MARK: - Control

    /// Starts a stopped job: retries the failed command, or runs the commands a manual or
    /// suspended job holds. A job with no commands moves to ``State/paused``.
    ///
    /// Resuming an ``State/interrupted`` job takes back the suspension: the chain goes on.
    /// Otherwise it does nothing.
    public func resume() {
        let deliver = core.withLock { core -> Bool in
            switch core.state {
            case .stopped:
                core.error = nil
                if core.commands.isEmpty {
                    Self.pause(&core)
                } else {
                    Self.start(&core)
                }
            case .interrupted:
                core.state = .started
                core.steps.append(.publish(.started))
            case .ejected, .paused, .started, .finished:
                break
            }
            return Self.claimDelivery(&core)
        }
        if deliver { _ = deliverSteps(from: .caller) }
    }

    /// Stops the job: a paused job stops at once; a running command finishes first (the job
    /// passes through ``State/interrupted``), and nothing more runs until ``resume()``.
    ///
    /// A command still waiting for its `delay:` has not started: the wait is abandoned and
    /// the command stays first in the chain.
    public func suspend() {
        let (deliver, timer) = core.withLock { core -> (Bool, JobTimer.Handle?) in
            var timer: JobTimer.Handle?
            switch core.state {
            case .paused:
                Self.stop(&core)
            case .started:
                core.steps += [.publish(.interrupted), .callback(.didInterrupt)]
                switch core.phase {
                case .delaying:
                    timer = core.delayTimer
                    Self.stop(&core)
                case .waitingForLane:
                    Self.stop(&core)
                case .none, .running:
                    core.state = .interrupted
                }
            case .ejected, .stopped, .finished, .interrupted:
                break
            }
            return (Self.claimDelivery(&core), timer)
        }
        timer?.cancel()
        if deliver { _ = deliverSteps(from: .caller) }
    }

    /// Drops every command that has not started; a running command finishes.
    ///
    /// A command waiting for its `delay:`, or for its custom tag, has not started and is dropped
    /// too. On a job stopped by a failed command, that command is dropped with its ``error()``.
    public func cancel() {
        let (deliver, timer) = core.withLock { core -> (Bool, JobTimer.Handle?) in
            var timer: JobTimer.Handle?
            switch core.phase {
            case .running:
                core.commands.removeAllButFirst()
            case .delaying, .waitingForLane:
                timer = core.delayTimer
                core.commands.removeAll()
                if core.state == .interrupted {
                    Self.stop(&core)
                } else {
                    Self.pause(&core)
                }
            case .none:
                core.commands.removeAll()
                // The failed command the job stopped on is gone: so is its error.
                core.error = nil
            }
            core.mainPending = core.commands.count { $0.isMain }
            return (Self.claimDelivery(&core), timer)
        }
        timer?.cancel()
        if deliver { _ = deliverSteps(from: .caller) }
    }

    // MARK: - Waiting

    /// Blocks the calling thread until the job is at rest: its last command is done, or it
    /// stopped (a failed command, ``suspend()``, or a manual job never resumed).
    ///
    /// Returns at once when nothing is queued. Called on the main queue while a command
    /// that must run on the main queue is pending, it returns at once instead of
    /// deadlocking; use ``waitUntilIdle(timeout:)`` to get an error for that case, or
    /// ``idle()`` from async code.
    ///
    /// Declared with backticks because `await` is a keyword; call it as `job.await()`.
    ///
    /// - Returns: The job, so that `let job = Job.doingInBackground { … }.await()` works.
    @discardableResult
    public func `await`() -> Self {
        _ = waitForRest(timeout: nil)
        return self
    }

    /// Blocks the calling thread until the job's last command is done or `seconds` have
    /// passed on the job's clock.
    ///
    /// - Parameter seconds: The longest wait. Negative or NaN waits not at all; infinity waits
    ///   without limit.
    /// - Returns: `true` when every command was done in time; `false` on timeout, when the job
    ///   stopped with commands left, or when waiting on the main queue could never end.
    @discardableResult
    public func `await`(_ seconds: TimeInterval) -> Bool {
        guard waitForRest(timeout: Self.timeout(seconds)) == .rest else { return false }
        return core.withLock { $0.commands.isEmpty }
    }

    /// Blocks the calling thread until the job is at rest, reporting why it could not.
    ///
    /// - Parameter timeout: The longest wait in seconds on the job's clock; `nil` waits
    ///   without limit.
    /// - Throws: ``JobChainError/Code/wouldDeadlock`` when called on the main queue while a
    ///   main-queue command is pending; ``JobChainError/Code/timedOut`` when the time ran out;
    ///   the failed command's error when the job stopped on one.
    public func waitUntilIdle(timeout: TimeInterval? = nil) throws {
        switch waitForRest(timeout: timeout.flatMap(Self.timeout)) {
        case .rest:
            break
        case .timedOut:
            throw JobChainError(
                code: .timedOut,
                message: "The job still had commands running after \(timeout ?? 0) s; wait longer or check for a command that never ends."
            )
        case .wouldDeadlock:
            throw JobChainError(
                code: .wouldDeadlock,
                message: "Waiting for the job on the main queue while one of its commands must run on the main queue would never end; wait from another thread or use `try await job.idle()`."
            )
        }
        if let error = core.withLock({ $0.state == .stopped ? $0.error : nil }) {
            throw error
        }
    }

    /// Suspends until the job is at rest: its last command is done, or it stopped.
    ///
    /// Returns at once when nothing is queued. Never blocks a thread, so it is safe on the
    /// main actor while `doInMain` commands are pending.
    ///
    /// - Throws: The failed command's error when the job stopped on one;
    ///   `CancellationError` when the waiting task is cancelled.
    public func idle() async throws {
        let id = core.withLock { core -> UInt64 in
            core.nextWaiterID += 1
            return core.nextWaiterID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = core.withLock { core -> Bool in
                    if core.cancelledWaiters.remove(id) != nil || core.isAtRest { return true }
                    core.waiters.append(Waiter(id: id) { _ in continuation.resume() })
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let waiter = core.withLock { core -> Waiter? in
                if let index = core.waiters.firstIndex(where: { $0.id == id }) {
                    return core.waiters.remove(at: index)
                }
                if !core.isAtRest { core.cancelledWaiters.insert(id) }
                return nil
            }
            waiter?.resume(false)
        }
        try Task.checkCancellation()
        if let error = core.withLock({ $0.state == .stopped ? $0.error : nil }) {
            throw error
        }
    }
}
