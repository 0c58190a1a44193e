public import Foundation

/// A five-field cron expression (`minute hour day-of-month month day-of-week`) in a time zone.
///
/// Each field is `*`, a number, a range (`1-5`), a step (`*/15`, `0-30/10`, `5/20`) or a list of
/// those (`1,15,30`). Months take `JAN`–`DEC` and days of the week `SUN`–`SAT` (0 or 7 is
/// Sunday). When both the day of the month and the day of the week are restricted (neither is
/// `*`), a day matches if either does, as in every cron since Vixie's.
///
/// Daylight saving time: a time that a jump forward skips (02:30 on the night clocks go from
/// 02:00 to 03:00) ticks once, at the first minute after the jump (03:00); a time that a jump
/// back repeats ticks once, the first time it comes.
public struct CronExpression: Sendable, Hashable, CustomStringConvertible {
    /// The expression as written.
    public let expression: String
    /// The time zone its times are in.
    public let timeZone: TimeZone
    private let minutes: Set<Int>
    private let hours: Set<Int>
    private let days: Set<Int>
    private let months: Set<Int>
    private let weekdays: Set<Int>
    private let anyDay: Bool
    private let anyWeekday: Bool
    // Sorted, for the search.
    private let minuteList: [Int]
    private let hourList: [Int]
    private let monthList: [Int]

    /// Parses an expression.
    ///
    /// - Parameters:
    ///   - expression: Five fields separated by spaces: minute (0–59), hour (0–23), day of the
    ///     month (1–31), month (1–12 or `JAN`–`DEC`), day of the week (0–7 or `SUN`–`SAT`).
    ///   - timeZone: The time zone of the expression's times.
    /// - Throws: ``TaskBrokerError`` with code `.invalidArgument` naming the field that is wrong,
    ///   or when no date ever matches (`0 0 30 2 *`).
    public init(_ expression: String, timeZone: TimeZone) throws {
        let fields = expression.split(whereSeparator: \.isWhitespace).map(String.init)
        guard fields.count == 5 else {
            throw Self.invalid(expression, "has \(fields.count) field(s); a cron expression has 5: minute hour day-of-month month day-of-week")
        }
        self.expression = expression
        self.timeZone = timeZone
        minutes = try Self.parse(fields[0], expression, field: "minute", range: 0...59, names: [:])
        hours = try Self.parse(fields[1], expression, field: "hour", range: 0...23, names: [:])
        days = try Self.parse(fields[2], expression, field: "day of the month", range: 1...31, names: [:])
        months = try Self.parse(fields[3], expression, field: "month", range: 1...12, names: Self.monthNames)
        let weekdays = try Self.parse(fields[4], expression, field: "day of the week", range: 0...7, names: Self.weekdayNames)
        self.weekdays = Set(weekdays.map { $0 % 7 })
        anyDay = fields[2].hasPrefix("*")
        anyWeekday = fields[4].hasPrefix("*")
        minuteList = minutes.sorted()
        hourList = hours.sorted()
        monthList = months.sorted()
        // A day of the month that no chosen month has (`30 2`), with no day of the week to match instead.
        if !anyDay, anyWeekday {
            let longest = months.map { Self.daysIn(month: $0, year: 2000) }.max() ?? 0
            if days.allSatisfy({ $0 > longest }) {
                throw Self.invalid(expression, "never matches a date: no chosen month has day \(days.sorted().map(String.init).joined(separator: ","))")
            }
        }
    }

    /// Parses an expression in the time zone named by an identifier.
    ///
    /// - Parameters:
    ///   - expression: Five fields (see ``init(_:timeZone:)``).
    ///   - timeZoneIdentifier: An IANA time zone name (`Europe/Paris`, `UTC`).
    /// - Throws: ``TaskBrokerError`` with code `.invalidArgument` for an unknown time zone or a wrong field.
    public init(_ expression: String, timeZoneIdentifier: String) throws {
        guard let timeZone = TimeZone(identifier: timeZoneIdentifier) else {
            throw TaskBrokerError(
                code: .invalidArgument,
                message: "Unknown time zone \"\(timeZoneIdentifier)\" for cron expression \"\(expression)\"; use an IANA name such as \"Europe/Paris\" or \"UTC\"."
            )
        }
        try self.init(expression, timeZone: timeZone)
    }

    public var description: String { "\(expression) (\(timeZone.identifier))" }

    /// The first time after `date` that the expression matches, or `nil` if none comes within 30 years.
    ///
    /// - Parameter date: The time to start after.
    /// - Returns: The next tick: strictly after `date`.
    public func nextTick(after date: Date) -> Date? {
        // Beyond ±30,000 years (or no time at all) there is no calendar to search.
        guard date.timeIntervalSince1970.isFinite, abs(date.timeIntervalSince1970) < 1e12 else { return nil }
        var local = LocalMinute(instant: date, in: timeZone)
        // Each local time maps to its first instant (a repeated time) or to the end of the jump
        // (a skipped one): a local time after `date`'s may still map to an instant before it while
        // a jump back repeats an hour. At most an hour of minutes is passed over.
        for _ in 0..<10_000 {
            guard let next = nextLocal(after: local) else { return nil }
            let instant = next.firstInstant(in: timeZone)
            if instant > date { return instant }
            local = next
        }
        return nil
    }

    // MARK: - Local search

    /// The first local minute after `local` that the expression matches (pure calendar arithmetic).
    private func nextLocal(after local: LocalMinute) -> LocalMinute? {
        var start = local.advanced()
        for year in start.year...(start.year + 30) {
            for month in monthList where year > start.year || month >= start.month {
                let sameMonth = year == start.year && month == start.month
                for day in (sameMonth ? start.day : 1)...max(1, Self.daysIn(month: month, year: year)) where dayMatches(year, month, day) {
                    let sameDay = sameMonth && day == start.day
                    for hour in hourList where !sameDay || hour >= start.hour {
                        let sameHour = sameDay && hour == start.hour
                        if let minute = minuteList.first(where: { !sameHour || $0 >= start.minute }) {
                            return LocalMinute(year: year, month: month, day: day, hour: hour, minute: minute)
                        }
                    }
                }
            }
            start = LocalMinute(year: year + 1, month: 1, day: 1, hour: 0, minute: 0)
        }
        return nil
    }

    private func dayMatches(_ year: Int, _ month: Int, _ day: Int) -> Bool {
        guard day <= Self.daysIn(month: month, year: year) else { return false }
        let dayOK = days.contains(day)
        let weekdayOK = weekdays.contains(LocalMinute.weekday(year: year, month: month, day: day))
        switch (anyDay, anyWeekday) {
        case (true, true): return true
        case (true, false): return weekdayOK
        case (false, true): return dayOK
        case (false, false): return dayOK || weekdayOK
        }
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // MARK: - Parsing

    private static let monthNames = ["JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12]
    private static let weekdayNames = ["SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6]

    private static func parse(_ text: String, _ expression: String, field: String, range: ClosedRange<Int>, names: [String: Int]) throws -> Set<Int> {
        var values: Set<Int> = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = part.split(separator: "/", omittingEmptySubsequences: false)
            guard pieces.count <= 2, let base = pieces.first, !base.isEmpty else {
                throw invalid(expression, "has a \(field) field \"\(text)\" that is not a number, a range, a step or a list of them")
            }
            var step = 1
            if pieces.count == 2 {
                guard let value = Int(pieces[1]), value > 0 else {
                    throw invalid(expression, "has a step \"\(pieces[1])\" in its \(field) field; a step is a whole number of at least 1")
                }
                step = value
            }
            let bounds: ClosedRange<Int>
            if base == "*" {
                bounds = range
            } else if let dash = base.firstIndex(of: "-") {
                let low = try value(base[..<dash], expression, field: field, range: range, names: names)
                let high = try value(base[base.index(after: dash)...], expression, field: field, range: range, names: names)
                guard low <= high else {
                    throw invalid(expression, "has a \(field) range \"\(base)\" that ends before it starts")
                }
                bounds = low...high
            } else {
                let low = try value(base, expression, field: field, range: range, names: names)
                // `5/20`: from 5 to the end of the range, every 20.
                bounds = pieces.count == 2 ? low...range.upperBound : low...low
            }
            values.formUnion(stride(from: bounds.lowerBound, through: bounds.upperBound, by: step))
        }
        return values
    }

    private static func value(_ text: Substring, _ expression: String, field: String, range: ClosedRange<Int>, names: [String: Int]) throws -> Int {
        if let number = Int(text) {
            guard range.contains(number) else {
                throw invalid(expression, "has \(number) in its \(field) field, outside \(range.lowerBound)–\(range.upperBound)")
            }
            return number
        }
        if let named = names[text.uppercased()] { return named }
        throw invalid(expression, "has \"\(text)\" in its \(field) field, which is not a number\(names.isEmpty ? "" : " or a name")")
    }

    private static func invalid(_ expression: String, _ problem: String) -> TaskBrokerError {
        TaskBrokerError(code: .invalidArgument, message: "The cron expression \"\(expression)\" \(problem).")
    }
}

/// A minute of local (wall-clock) time: calendar arithmetic without a time zone.
struct LocalMinute: Hashable, Comparable {
    var year: Int
    var month: Int
    var day: Int
    var hour: Int
    var minute: Int

    init(year: Int, month: Int, day: Int, hour: Int, minute: Int) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
    }

    /// The local minute that holds `instant` in `timeZone`.
    init(instant: Date, in timeZone: TimeZone) {
        self.init(secondsSince1970: Int64(instant.timeIntervalSince1970.rounded(.down)) + Int64(timeZone.secondsFromGMT(for: instant)))
    }

    init(secondsSince1970 seconds: Int64) {
        let days = seconds.floorDivided(by: 86_400)
        let inDay = Int(seconds - days * 86_400)
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = z.floorDivided(by: 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        day = Int(dayOfYear - (153 * monthIndex + 2) / 5 + 1)
        month = Int(monthIndex < 10 ? monthIndex + 3 : monthIndex - 9)
        year = Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0)
        hour = inDay / 3600
        minute = inDay % 3600 / 60
    }

    /// Seconds since 1970 of this local time read as UTC.
    var secondsSince1970: Int64 {
        // Howard Hinnant's days_from_civil.
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = y.floorDivided(by: 400)
        let yearOfEra = y - era * 400
        let dayOfYear = Int64((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1)
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return days * 86_400 + Int64(hour * 3600 + minute * 60)
    }

    /// The next minute.
    func advanced() -> LocalMinute {
        LocalMinute(secondsSince1970: secondsSince1970 + 60)
    }

    /// 0 for Sunday … 6 for Saturday.
    static func weekday(year: Int, month: Int, day: Int) -> Int {
        let days = LocalMinute(year: year, month: month, day: day, hour: 0, minute: 0).secondsSince1970.floorDivided(by: 86_400)
        // 1970-01-01 was a Thursday (4).
        return Int((days + 4) - (days + 4).floorDivided(by: 7) * 7)
    }

    /// The first instant whose local time in `timeZone` is this minute; for a minute that a jump
    /// forward skips, the instant of the jump.
    func firstInstant(in timeZone: TimeZone) -> Date {
        let local = secondsSince1970
        func offset(at seconds: Int64) -> Int64 {
            Int64(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds))))
        }
        let before = offset(at: local - 86_400)
        let after = offset(at: local + 86_400)
        let valid = Set([before, after]).compactMap { candidate -> Int64? in
            offset(at: local - candidate) == candidate ? local - candidate : nil
        }
        if let first = valid.min() { return Date(timeIntervalSince1970: Double(first)) }
        // Skipped: the jump lies between the two readings; find its second.
        var low = local - max(before, after)
        var high = local - min(before, after)
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if offset(at: middle) == before {
                low = middle
            } else {
                high = middle
            }
        }
        return Date(timeIntervalSince1970: Double(high))
    }

    static func < (lhs: LocalMinute, rhs: LocalMinute) -> Bool {
        (lhs.year, lhs.month, lhs.day, lhs.hour, lhs.minute) < (rhs.year, rhs.month, rhs.day, rhs.hour, rhs.minute)
    }
}

extension Int64 {
    /// Division rounded towards minus infinity (times before 1970 stay on the right day).
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
