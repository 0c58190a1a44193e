public import Foundation

/// A schedule as stored: what `TaskDatabase.schedules()` lists and `queuekit schedules` prints.
public struct TaskScheduleState: Sendable, Hashable {
    /// The schedule's name.
    public var name: String
    /// Its recurrence as the last scheduler that ran it described it (`cron 0 3 * * * (UTC)`, `every 60.0 seconds`).
    public var recurrence: String
    /// The last tick recorded: its action was saved (or its key was still stored).
    public var lastTick: Date?
    /// When the last tick was recorded (the database server's clock on PostgreSQL).
    public var lastEnqueuedAt: Date?
    /// The key of the last tick's action.
    public var lastKey: String?
    /// The next tick, as the last scheduler that ran it computed it.
    public var nextTick: Date?

    /// Creates a stored schedule state (for storage backends).
    ///
    /// - Parameters:
    ///   - name: The schedule's name.
    ///   - recurrence: Its recurrence, described.
    ///   - lastTick: The last tick recorded.
    ///   - lastEnqueuedAt: When it was recorded.
    ///   - lastKey: The key of its action.
    ///   - nextTick: The next tick.
    public init(name: String, recurrence: String, lastTick: Date? = nil, lastEnqueuedAt: Date? = nil, lastKey: String? = nil, nextTick: Date? = nil) {
        self.name = name
        self.recurrence = recurrence
        self.lastTick = lastTick
        self.lastEnqueuedAt = lastEnqueuedAt
        self.lastKey = lastKey
        self.nextTick = nextTick
    }
}

/// What recording a tick did (``TaskStorage/recordTick(schedule:tick:next:task:)``).
public enum TaskTickRecord: Sendable, Hashable {
    /// The tick is recorded and its action saved.
    case enqueued(StoredTask)
    /// The tick is recorded; its action's key was still stored (live or a dead letter), so
    /// nothing was saved.
    case keyStillStored
    /// The schedule's recorded last tick is this one or later (another process, or this one
    /// before a clock jumped back, recorded it): nothing was saved.
    case alreadyRecorded(lastTick: Date)
}
