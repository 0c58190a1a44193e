import Foundation
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker
import Testing

/// Cron expressions and intervals: parsing, the ticks they give, and daylight saving time in
/// fixed time zones. Pure: no clock, no storage.
struct CronExpressionTests {
    private static let utc = TimeZone(identifier: "UTC")!

    /// `2026-11-27T16:50:00Z` from its text.
    private static func date(_ text: String) -> Date {
        try! Date(text, strategy: .iso8601)
    }

    private static func ticks(_ recurrence: TaskRecurrence, after start: String, count: Int) -> [Date] {
        var ticks: [Date] = []
        var date = Self.date(start)
        while ticks.count < count, let next = recurrence.nextTick(after: date) {
            ticks.append(next)
            date = next
        }
        return ticks
    }

    @Test func rangesStepsListsAndNamesGiveTheirTicks() throws {
        let workHours = try TaskRecurrence.cron("*/15 9-17 * * MON-FRI")
        // Friday 27 November 2026, 16:50 UTC: the rest of Friday's 17:00 hour, then Monday.
        #expect(Self.ticks(workHours, after: "2026-11-27T16:50:00Z", count: 5) == [
            "2026-11-27T17:00:00Z", "2026-11-27T17:15:00Z", "2026-11-27T17:30:00Z", "2026-11-27T17:45:00Z", "2026-11-30T09:00:00Z",
        ].map(Self.date))
        let list = try TaskRecurrence.cron("5/20 0 1,15 jan,Jul *")
        #expect(Self.ticks(list, after: "2026-11-27T00:00:00Z", count: 4) == [
            "2027-01-01T00:05:00Z", "2027-01-01T00:25:00Z", "2027-01-01T00:45:00Z", "2027-01-15T00:05:00Z",
        ].map(Self.date))
        // A tick is strictly after the date given.
        #expect(try TaskRecurrence.cron("0 * * * *").nextTick(after: Self.date("2026-11-27T10:00:00Z")) == Self.date("2026-11-27T11:00:00Z"))
        #expect(try TaskRecurrence.cron("0 * * * *").nextTick(after: Self.date("2026-11-27T09:59:59.5Z")) == Self.date("2026-11-27T10:00:00Z"))
    }

    /// Both day fields restricted: a day matches if either does (Friday or the 13th).
    @Test func aDayMatchesByItsDateOrItsWeekday() throws {
        let cron = try TaskRecurrence.cron("0 0 13 * 5")
        #expect(Self.ticks(cron, after: "2026-11-27T00:00:00Z", count: 4) == [
            "2026-12-04T00:00:00Z", "2026-12-11T00:00:00Z", "2026-12-13T00:00:00Z", "2026-12-18T00:00:00Z",
        ].map(Self.date))
        // Sunday is 0 and 7; a step on `*` keeps the day of the month unrestricted.
        #expect(try TaskRecurrence.cron("0 12 * * 7").nextTick(after: Self.date("2026-11-27T00:00:00Z")) == Self.date("2026-11-29T12:00:00Z"))
        #expect(try TaskRecurrence.cron("0 12 */10 * SUN").nextTick(after: Self.date("2026-11-27T00:00:00Z")) == Self.date("2026-11-29T12:00:00Z"))
        #expect(try TaskRecurrence.cron("0 0 29 2 *").nextTick(after: Self.date("2026-03-01T00:00:00Z")) == Self.date("2028-02-29T00:00:00Z"))
    }

    /// Against a minute-by-minute scan with Foundation's calendar (UTC, where every minute is one
    /// instant), for expressions built from random fields.
    @Test func ticksMatchAMinuteByMinuteScan() throws {
        var generator = SystemRandomNumberGenerator()
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = Self.utc
        for _ in 0..<30 {
            let minute = ["*", "*/7", "3-50/11", "0,30", "59"].randomElement(using: &generator)!
            let hour = ["*", "*/5", "9-17", "0,12,23"].randomElement(using: &generator)!
            let day = ["*", "1-10", "*/3", "15,28"].randomElement(using: &generator)!
            let weekday = ["*", "MON-FRI", "0", "3,6"].randomElement(using: &generator)!
            let cron = try CronExpression("\(minute) \(hour) \(day) * \(weekday)", timeZone: Self.utc)
            let start = Self.date("2026-02-26T22:00:00Z").addingTimeInterval(Double(Int.random(in: 0..<86_400, using: &generator)))
            // The scan: every minute for five days.
            var expected: [Date] = []
            var minuteStart = Date(timeIntervalSince1970: (start.timeIntervalSince1970 / 60).rounded(.down) * 60 + 60)
            while minuteStart < start.addingTimeInterval(5 * 86_400) {
                let parts = calendar.dateComponents([.minute, .hour, .day, .weekday], from: minuteStart)
                if Self.matches(cron.expression, parts) { expected.append(minuteStart) }
                minuteStart.addTimeInterval(60)
            }
            var found: [Date] = []
            var date = start
            while let next = cron.nextTick(after: date), next < start.addingTimeInterval(5 * 86_400) {
                found.append(next)
                date = next
            }
            #expect(found == expected, "\(cron.expression) after \(start)")
        }
    }

    /// Spring forward in New York (8 March 2026, 02:00 EST becomes 03:00 EDT): a skipped time
    /// ticks once at 03:00; several skipped times are one tick.
    @Test func aTimeTheClockSkipsTicksOnceAtTheJump() throws {
        let zone = "America/New_York"
        #expect(Self.ticks(try .cron("30 2 * * *", timeZoneIdentifier: zone), after: "2026-03-07T12:00:00Z", count: 3) == [
            "2026-03-08T07:00:00Z" /* 03:00 EDT */, "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z",
        ].map(Self.date))
        #expect(Self.ticks(try .cron("*/15 2 * * *", timeZoneIdentifier: zone), after: "2026-03-07T12:00:00Z", count: 2) == [
            "2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z",
        ].map(Self.date))
        // Every minute: 01:59 EST, then 03:00 EDT once, then 03:01.
        #expect(Self.ticks(try .cron("* * * * *", timeZoneIdentifier: zone), after: "2026-03-08T06:58:30Z", count: 3) == [
            "2026-03-08T06:59:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:01:00Z",
        ].map(Self.date))
        // Berlin (29 March 2026, 02:00 CET becomes 03:00 CEST).
        #expect(try TaskRecurrence.cron("30 2 * * *", timeZoneIdentifier: "Europe/Berlin").nextTick(after: Self.date("2026-03-28T12:00:00Z"))
            == Self.date("2026-03-29T01:00:00Z"))
    }

    /// Fall back in New York (1 November 2026, 02:00 EDT becomes 01:00 EST): a repeated time
    /// ticks once, the first time.
    @Test func aTimeTheClockRepeatsTicksOnce() throws {
        let zone = "America/New_York"
        #expect(Self.ticks(try .cron("30 1 * * *", timeZoneIdentifier: zone), after: "2026-10-31T12:00:00Z", count: 2) == [
            "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z",
        ].map(Self.date))
        #expect(Self.ticks(try .cron("0 * * * *", timeZoneIdentifier: zone), after: "2026-11-01T04:30:00Z", count: 3) == [
            "2026-11-01T05:00:00Z" /* 01:00 EDT */, "2026-11-01T07:00:00Z" /* 02:00 EST */, "2026-11-01T08:00:00Z",
        ].map(Self.date))
        // Started inside the repeated hour: its first pass is over, the next tick is after it.
        #expect(try TaskRecurrence.cron("*/20 * * * *", timeZoneIdentifier: zone).nextTick(after: Self.date("2026-11-01T06:30:00Z"))
            == Self.date("2026-11-01T07:00:00Z"))
    }

    @Test func intervalsTickAtMultiplesOfThemselvesSince1970() throws {
        let every = try TaskRecurrence.every(.seconds(5))
        #expect(every.nextTick(after: Date(timeIntervalSince1970: 1000.2)) == Date(timeIntervalSince1970: 1005))
        #expect(every.nextTick(after: Date(timeIntervalSince1970: 1005)) == Date(timeIntervalSince1970: 1010))
        #expect(try TaskRecurrence.every(.milliseconds(1500)).nextTick(after: Date(timeIntervalSince1970: 3)) == Date(timeIntervalSince1970: 4.5))
        #expect(every.latestTick(atOrBefore: Date(timeIntervalSince1970: 1012), after: nil) == Date(timeIntervalSince1970: 1010))
        #expect(every.latestTick(atOrBefore: Date(timeIntervalSince1970: 1012), after: Date(timeIntervalSince1970: 1010)) == nil)
        #expect(every.nextTick(after: Date(timeIntervalSince1970: .nan)) == nil)
    }

    @Test func theLatestTickIsFoundByLookingBack() throws {
        let nightly = try TaskRecurrence.cron("0 3 * * *")
        #expect(nightly.latestTick(atOrBefore: Self.date("2026-11-28T10:00:00Z"), after: Self.date("2026-11-20T00:00:00Z")) == Self.date("2026-11-28T03:00:00Z"))
        #expect(nightly.latestTick(atOrBefore: Self.date("2026-11-28T10:00:00Z"), after: Self.date("2026-11-28T03:00:00Z")) == nil)
        #expect(nightly.latestTick(atOrBefore: Self.date("2026-11-28T03:00:00Z"), after: nil) == Self.date("2026-11-28T03:00:00Z"))
        // Once a year: found by widening the look back.
        #expect(try TaskRecurrence.cron("0 0 1 1 *").latestTick(atOrBefore: Self.date("2026-11-28T10:00:00Z"), after: nil) == Self.date("2026-01-01T00:00:00Z"))
    }

    @Test func aTickKeyNamesTheScheduleAndTheTimeInUTC() {
        #expect(TaskTick(schedule: "nightly", date: Self.date("2026-11-28T03:00:00Z")).key == "nightly@2026-11-28T03:00:00Z")
        #expect(TaskTick(schedule: "fast", date: Date(timeIntervalSince1970: 1.5)).key == "fast@1970-01-01T00:00:01.500Z")
        #expect(TaskTick(schedule: "odd", date: Date(timeIntervalSince1970: .infinity)).key == "odd@inf")
    }

    @Test(arguments: [
        ("* * * *", "has 4 field(s)"),
        ("60 * * * *", "60 in its minute field"),
        ("*/0 * * * *", "step \"0\" in its minute field"),
        ("5-1 * * * *", "minute range \"5-1\""),
        ("* * * FOO *", "\"FOO\" in its month field"),
        ("* 24 * * *", "24 in its hour field"),
        ("* * * * 8", "8 in its day of the week field"),
        ("0 0 30 2 *", "never matches a date"),
        ("1,,2 * * * *", "minute field \"1,,2\""),
    ])
    func aWrongExpressionNamesWhatIsWrong(_ expression: String, _ problem: String) {
        #expect { try TaskRecurrence.cron(expression) } throws: { error in
            let error = error as? TaskBrokerError
            return error?.code == .invalidArgument && error?.message.contains(problem) == true && error?.message.contains(expression) == true
        }
    }

    @Test func anUnknownTimeZoneAndAnIntervalUnderASecondAreRefused() {
        #expect { try TaskRecurrence.cron("0 3 * * *", timeZoneIdentifier: "Mars/Olympus_Mons") } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidArgument && "\(error)".contains("Mars/Olympus_Mons")
        }
        for interval: Duration in [.zero, .seconds(-1), .milliseconds(999), .seconds(Int64.max)] {
            #expect { try TaskRecurrence.every(interval) } throws: { error in
                (error as? TaskBrokerError)?.code == .invalidArgument && "\(error)".contains("at least 1 second")
            }
        }
        #expect { try TaskSchedule(" ", .every(.seconds(1))) { TestAction(key: $0.key, queueName: "q") } } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidName
        }
    }

    /// Whether calendar parts match an expression of the random test's shapes (the fields it uses).
    private static func matches(_ expression: String, _ parts: DateComponents) -> Bool {
        let fields = expression.split(separator: " ").map(String.init)
        func has(_ field: String, _ value: Int, range: ClosedRange<Int>) -> Bool {
            field.split(separator: ",").contains { part in
                let pieces = part.split(separator: "/")
                let step = pieces.count == 2 ? Int(pieces[1])! : 1
                let bounds: ClosedRange<Int>
                if pieces[0] == "*" {
                    bounds = range
                } else if pieces[0] == "MON-FRI" {
                    bounds = 1...5
                } else if let dash = pieces[0].firstIndex(of: "-") {
                    bounds = Int(pieces[0][..<dash])!...Int(pieces[0][pieces[0].index(after: dash)...])!
                } else {
                    bounds = Int(pieces[0])!...Int(pieces[0])!
                }
                return bounds.contains(value) && (value - bounds.lowerBound) % step == 0
            }
        }
        let weekday = parts.weekday! - 1
        let dayOK = has(fields[2], parts.day!, range: 1...31)
        let weekdayOK = has(fields[4], weekday, range: 0...6)
        let day = switch (fields[2].hasPrefix("*"), fields[4].hasPrefix("*")) {
        case (true, true): true
        case (true, false): weekdayOK
        case (false, true): dayOK
        case (false, false): dayOK || weekdayOK
        }
        return day && has(fields[0], parts.minute!, range: 0...59) && has(fields[1], parts.hour!, range: 0...23)
    }
}
