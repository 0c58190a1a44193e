public import Foundation

/// A job that runs on a recurrence: each tick saves one action, once across every process that
/// runs a ``TaskScheduler`` with it.
///
/// ```swift
/// let nightly = try TaskSchedule("nightly-report", .cron("0 3 * * *", timeZoneIdentifier: "Europe/Paris")) { tick in
///     ReportAction(key: tick.key, day: tick.date)
/// }
/// ```
public struct TaskSchedule: Sendable {
    /// What a scheduler does with ticks that came while no process ran the schedule.
    public enum MissedTicks: Sendable, Hashable {
        /// The last missed tick is enqueued once, when a scheduler starts; the ones before it
        /// are dropped (the default: a nightly job missed during a deploy still runs, once).
        case runLatest
        /// Missed ticks are dropped; the first tick after the start is the next one enqueued.
        case skip
    }

    /// The schedule's name: the key of its stored state (last tick, next tick).
    public let name: String
    /// When it ticks.
    public let recurrence: TaskRecurrence
    /// What happens to ticks missed while no scheduler ran it.
    public let missedTicks: MissedTicks
    let makeTask: @Sendable (TaskTick) throws -> NewTask

    /// Creates a schedule.
    ///
    /// - Parameters:
    ///   - name: Unique among the schedules of a database; a restarted scheduler finds the
    ///     schedule's last tick under it.
    ///   - recurrence: When it ticks.
    ///   - missedTicks: What to do with ticks missed while no scheduler ran (``MissedTicks/runLatest`` by default).
    ///   - action: The action to save for a tick. Give it ``TaskTick/key`` as its key for one
    ///     action per tick; with a fixed key, a tick whose previous action is still stored
    ///     (waiting, running or a dead letter) saves nothing, so ticks never pile up.
    /// - Throws: ``TaskBrokerError`` with code `.invalidName` for an empty name.
    public init<Action: TaskQueueAction>(
        _ name: String, _ recurrence: TaskRecurrence, missedTicks: MissedTicks = .runLatest,
        action: @escaping @Sendable (TaskTick) -> Action
    ) throws {
        let name = name.normalizedName
        guard !name.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw TaskBrokerError(code: .invalidName, message: "A schedule's name is empty; give each schedule a name of its own.")
        }
        self.name = name
        self.recurrence = recurrence
        self.missedTicks = missedTicks
        makeTask = { tick in try NewTask(encoding: action(tick), with: JSONEncoder()) }
    }
}

/// One tick of a schedule: what its action is built from.
public struct TaskTick: Sendable, Hashable, CustomStringConvertible {
    /// The schedule's name.
    public let schedule: String
    /// The tick's time.
    public let date: Date

    /// Creates a tick.
    ///
    /// - Parameters:
    ///   - schedule: The schedule's name.
    ///   - date: The tick's time.
    public init(schedule: String, date: Date) {
        self.schedule = schedule
        self.date = date
    }

    /// A key unique to the schedule and the tick: the schedule's name, `@`, and the tick's time
    /// in UTC, such as `nightly-report@2026-11-28T02:00:00Z` (with milliseconds when it has some).
    public var key: String {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        // Ticks are well within ±292 million years; anything else is written as it is.
        guard milliseconds.isFinite, abs(milliseconds) < 1e17 else { return "\(schedule)@\(date.timeIntervalSince1970)" }
        let whole = Int64(milliseconds)
        let seconds = whole.floorDivided(by: 1000)
        let fraction = whole - seconds * 1000
        let utc = LocalMinute(secondsSince1970: seconds)
        let second = seconds - utc.secondsSince1970
        var text = String(format: "%04d-%02d-%02dT%02d:%02d:%02lld", utc.year, utc.month, utc.day, utc.hour, utc.minute, second)
        if fraction != 0 { text += String(format: ".%03lld", fraction) }
        return "\(schedule)@\(text)Z"
    }

    public var description: String { key }
}
