public import Foundation

/// When a ``TaskSchedule`` ticks: a cron expression in a time zone, or a fixed interval.
public struct TaskRecurrence: Sendable, Hashable, CustomStringConvertible {
    private enum Kind: Hashable {
        case cron(CronExpression)
        /// Ticks at whole multiples of this many milliseconds since 1970: every process agrees
        /// on them without talking to the others.
        case every(milliseconds: Int64)
    }

    private let kind: Kind

    /// Ticks when a five-field cron expression matches (see ``CronExpression``).
    ///
    /// - Parameters:
    ///   - expression: `minute hour day-of-month month day-of-week`, such as `*/15 * * * *` or `0 3 * * MON-FRI`.
    ///   - timeZone: The time zone of the expression's times (UTC by default).
    /// - Returns: The recurrence.
    /// - Throws: ``TaskBrokerError`` with code `.invalidArgument` naming the field that is wrong.
    public static func cron(_ expression: String, timeZone: TimeZone = TimeZone(secondsFromGMT: 0) ?? .current) throws -> TaskRecurrence {
        TaskRecurrence(kind: .cron(try CronExpression(expression, timeZone: timeZone)))
    }

    /// Ticks when a five-field cron expression matches, in the time zone named by an identifier.
    ///
    /// - Parameters:
    ///   - expression: `minute hour day-of-month month day-of-week`.
    ///   - timeZoneIdentifier: An IANA time zone name (`America/New_York`).
    /// - Returns: The recurrence.
    /// - Throws: ``TaskBrokerError`` with code `.invalidArgument` for an unknown time zone or a wrong field.
    public static func cron(_ expression: String, timeZoneIdentifier: String) throws -> TaskRecurrence {
        TaskRecurrence(kind: .cron(try CronExpression(expression, timeZoneIdentifier: timeZoneIdentifier)))
    }

    /// Ticks every `interval`, at whole multiples of it since 1970 (every 5 minutes: at :00, :05, …
    /// UTC), so that every process computes the same ticks.
    ///
    /// - Parameter interval: At least one second (counted in whole milliseconds).
    /// - Returns: The recurrence.
    /// - Throws: ``TaskBrokerError`` with code `.invalidArgument` for an interval under a second or over 1,000 years.
    public static func every(_ interval: Duration) throws -> TaskRecurrence {
        let (seconds, attoseconds) = interval.components
        // A thousand years: far beyond any schedule, and no overflow in the tick arithmetic.
        guard interval >= .seconds(1), seconds <= 1000 * 366 * 86_400 else {
            throw TaskBrokerError(
                code: .invalidArgument,
                message: "A schedule's interval is \(interval); it must be at least 1 second and at most 1,000 years."
            )
        }
        return TaskRecurrence(kind: .every(milliseconds: seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    }

    public var description: String {
        switch kind {
        case .cron(let cron): "cron \(cron)"
        case .every(let milliseconds): "every \(Duration.milliseconds(milliseconds))"
        }
    }

    /// The first tick strictly after `date`; `nil` when none comes (a cron expression that
    /// matches no date within 30 years).
    ///
    /// - Parameter date: The time to start after.
    /// - Returns: The next tick.
    public func nextTick(after date: Date) -> Date? {
        switch kind {
        case .cron(let cron):
            return cron.nextTick(after: date)
        case .every(let interval):
            guard let milliseconds = Self.milliseconds(date) else { return nil }
            let next = (milliseconds.floorDivided(by: interval) + 1) * interval
            return Date(timeIntervalSince1970: Double(next) / 1000)
        }
    }

    /// The last tick at or before `date` and after `lower` (if given); `nil` if there is none.
    ///
    /// Searches back in widening windows, so that a schedule that ticks every minute costs at
    /// most an hour of ticks, and one that ticks once a year a year's.
    func latestTick(atOrBefore date: Date, after lower: Date?) -> Date? {
        if case .every(let interval) = kind {
            guard let milliseconds = Self.milliseconds(date) else { return nil }
            let tick = Date(timeIntervalSince1970: Double(milliseconds.floorDivided(by: interval) * interval) / 1000)
            return lower.map { tick > $0 } ?? true ? tick : nil
        }
        let windows: [TimeInterval] = [3600, 86_400, 32 * 86_400, 367 * 86_400, 8 * 367 * 86_400, 31 * 367 * 86_400]
        for window in windows {
            var start = date.addingTimeInterval(-window)
            let reachesLower = lower.map { start <= $0 } ?? false
            if let lower, reachesLower { start = lower }
            var latest: Date?
            var tick = nextTick(after: start)
            while let current = tick, current <= date {
                latest = current
                tick = nextTick(after: current)
            }
            if latest != nil || reachesLower { return latest }
        }
        return nil
    }

    /// Milliseconds since 1970, for dates within ±3 million years (`nil` beyond, and for no time).
    private static func milliseconds(_ date: Date) -> Int64? {
        let value = (date.timeIntervalSince1970 * 1000).rounded(.down)
        return value.isFinite && abs(value) < 1e17 ? Int64(value) : nil
    }
}
