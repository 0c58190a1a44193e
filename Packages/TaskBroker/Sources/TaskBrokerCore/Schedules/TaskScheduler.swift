public import Foundation
public import Logging
public import QueueRetry
public import ServiceLifecycle

/// Runs schedules: at each tick it saves the schedule's action into a ``TaskDatabase``, once
/// across every process and machine that runs the same schedule on the same database.
///
/// Each tick is recorded in the database in the transaction that saves its action
/// (``TaskStorage/recordTick(schedule:tick:next:task:)``): a second process, a restart or a
/// wall clock that jumps back finds the tick recorded and saves nothing. Run one scheduler per
/// process (as many processes as you like); any broker serving the action's queue runs it.
///
/// ```swift
/// let scheduler = try TaskScheduler(database: database, schedules: [
///     TaskSchedule("cleanup", .every(.seconds(60))) { tick in CleanupAction(key: tick.key) },
/// ])
/// try await scheduler.run()  // or hand it to a ServiceGroup
/// ```
///
/// It sleeps until the nearest tick (one timer, no polling). A tick it fails to record (the
/// database is down) is tried again with ``Configuration/storageRetryBackoff``; ticks that pass
/// meanwhile are collapsed into the latest one.
public final class TaskScheduler: Service, Sendable {
    /// Tunables; every field has a default.
    public struct Configuration: Sendable {
        /// The wall clock that ticks are read from (`Date.init` by default; tests inject one).
        public var wallClock: @Sendable () -> Date
        /// The delay before a tick that could not be recorded is tried again.
        public var storageRetryBackoff: Backoff
        /// Where the scheduler logs.
        public var logger: Logger

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - wallClock: The wall clock that ticks are read from.
        ///   - storageRetryBackoff: The delay before a failed recording is tried again.
        ///   - logger: Where the scheduler logs.
        public init(
            wallClock: @escaping @Sendable () -> Date = { Date() },
            storageRetryBackoff: Backoff = Backoff(initial: .seconds(1), maximum: .seconds(60)),
            logger: Logger = Logger(label: "TaskBroker.TaskScheduler")
        ) {
            self.wallClock = wallClock
            self.storageRetryBackoff = storageRetryBackoff
            self.logger = logger
        }
    }

    private let database: TaskDatabase
    private let schedules: [TaskSchedule]
    private let configuration: Configuration
    private let sleep: @Sendable (Duration) async throws -> Void
    private let broadcaster = EventBroadcaster<TaskSchedulerEvent>()

    /// Creates a scheduler; ``run()`` runs it.
    ///
    /// - Parameters:
    ///   - database: Where ticks are recorded and actions saved.
    ///   - schedules: The schedules, each with a name of its own.
    ///   - configuration: Tunables.
    ///   - clock: The clock the scheduler sleeps on (`ContinuousClock` by default).
    /// - Throws: ``TaskBrokerError`` with code `.invalidArgument` for no schedules or two with one name.
    public init(
        database: TaskDatabase, schedules: [TaskSchedule], configuration: Configuration = .init(),
        clock: some Clock<Duration> = ContinuousClock()
    ) throws {
        guard !schedules.isEmpty else {
            throw TaskBrokerError(code: .invalidArgument, message: "A TaskScheduler needs at least one schedule.")
        }
        var seen: Set<String> = []
        for schedule in schedules where !seen.insert(schedule.name).inserted {
            throw TaskBrokerError(code: .invalidArgument, message: "Two schedules are named \"\(schedule.name)\"; each schedule needs a name of its own.")
        }
        self.database = database
        self.schedules = schedules
        self.configuration = configuration
        sleep = { try await clock.sleep(for: $0) }
    }

    /// What the scheduler does, tick by tick: a new stream per call, finished when ``run()`` returns.
    public var events: AsyncStream<TaskSchedulerEvent> {
        broadcaster.stream()
    }

    /// Runs the schedules until the task is cancelled or a graceful shutdown begins.
    ///
    /// A graceful shutdown lets a tick that is being recorded finish (its event included) and then
    /// ends the run; cancelling the task ends it at once, and a tick cut off while it was
    /// committing may be recorded without its event.
    ///
    /// - Throws: ``TaskBrokerError`` with code `.unsupported` for a backend without schedules;
    ///   other storage failures are retried, and cancellation ends the run.
    public func run() async throws {
        defer { broadcaster.finish() }
        do {
            try await loop()
        } catch is CancellationError {
            return
        }
    }

    /// Sleeps for `duration`, or until a graceful shutdown begins (then throws `CancellationError`).
    private func wait(_ duration: Duration) async throws {
        let sleep = sleep
        try await cancelWhenGracefulShutdown { try await sleep(duration) }
        if Task.isShuttingDownGracefully { throw CancellationError() }
    }

    private func loop() async throws {
        let storage = database.storage
        let logger = configuration.logger
        // The stored last ticks; read again until storage answers.
        var failures = 0
        var plan: SchedulePlan
        while true {
            do {
                let stored = try await storage.schedules()
                plan = SchedulePlan(
                    schedules: schedules,
                    lastTicks: Dictionary(stored.compactMap { state in state.lastTick.map { (state.name, $0) } }, uniquingKeysWith: max),
                    now: configuration.wallClock()
                )
                try await storage.registerSchedules(plan.states())
                break
            } catch let error where !(error is CancellationError) {
                // A backend without schedules will not grow them: said at once, not retried.
                if (error as? TaskBrokerError)?.code == .unsupported { throw error }
                failures += 1
                let delay = configuration.storageRetryBackoff.delay(afterFailures: failures)
                logger.warning("could not read the stored schedules; trying again", metadata: ["error": "\(error)", "retryIn": "\(delay)"])
                broadcaster.yield(.storageFailed(message: "\(error)", retryIn: delay))
                try await wait(delay)
            }
        }
        while !Task.isShuttingDownGracefully {
            let now = configuration.wallClock()
            for (index, tickDate) in plan.due(at: now) where !Task.isShuttingDownGracefully {
                let schedule = plan.entries[index].schedule
                let tick = TaskTick(schedule: schedule.name, date: tickDate)
                do {
                    let task = try schedule.makeTask(tick)
                    let next = schedule.recurrence.nextTick(after: tickDate)
                    switch try await storage.recordTick(schedule: schedule.name, tick: tickDate, next: next, task: task) {
                    case .enqueued(let stored):
                        database.publish([.saved(stored)])
                        plan.recorded(index, tick: tickDate)
                        logger.debug("schedule ticked", metadata: ["tick": "\(tick)", "key": "\(task.key)"])
                        broadcaster.yield(.enqueued(tick, key: task.key))
                    case .keyStillStored:
                        plan.recorded(index, tick: tickDate)
                        logger.info("schedule ticked while its action's key is still stored: nothing saved", metadata: ["tick": "\(tick)", "key": "\(task.key)"])
                        broadcaster.yield(.keyStillStored(tick, key: task.key))
                    case .alreadyRecorded(let lastTick):
                        plan.recorded(index, tick: tickDate, recordedThrough: lastTick)
                        broadcaster.yield(.recordedElsewhere(tick))
                    }
                } catch let error where !(error is CancellationError) {
                    if (error as? TaskBrokerError)?.code == .unsupported { throw error }
                    let delay = plan.failed(index, now: now) { configuration.storageRetryBackoff.delay(afterFailures: $0) }
                    logger.warning("could not record a tick; trying again", metadata: ["tick": "\(tick)", "error": "\(error)", "retryIn": "\(delay)"])
                    broadcaster.yield(.failed(tick, message: "\(error)", retryIn: delay))
                }
            }
            guard let wake = plan.nextWake else {
                // No schedule ticks again: wait for the end.
                try await wait(.seconds(86_400 * 365))
                continue
            }
            let delay = Duration.timer(until: wake, now: configuration.wallClock())
            if delay > .zero { try await wait(delay) }
        }
    }
}

/// What a ``TaskScheduler`` did (``TaskScheduler/events``).
public enum TaskSchedulerEvent: Sendable, Hashable {
    /// The tick is recorded and its action, with this key, saved.
    case enqueued(TaskTick, key: String)
    /// The tick is recorded; an action with its key was still stored, so none was saved.
    case keyStillStored(TaskTick, key: String)
    /// Another process (or this one, before its wall clock jumped back) recorded the tick first.
    case recordedElsewhere(TaskTick)
    /// The tick could not be recorded; it is tried again after `retryIn` (as the latest tick by then).
    case failed(TaskTick, message: String, retryIn: Duration)
    /// The stored schedules could not be read at the start; read again after `retryIn`.
    case storageFailed(message: String, retryIn: Duration)
}
