import Foundation

// Actions saved to run later. A queue whose next head's time has not come waits without a timer of
// its own (and may be forgotten like an idle queue): the broker keeps one timer, for the earliest
// time it knows of. When it fires, the schedule (storage's index of not-before times) names the
// queues whose time has come since the last look, and the next time to wake up.
extension BrokerStateMachine {
    /// Where the broker is with the schedule.
    struct Schedule {
        /// Every action whose (not-before, position) is at or before this was dealt with: the
        /// schedule is read after it. At start, the broker's start time: queues stored then are
        /// listed and read anyway.
        var cursor: TaskScheduleEntry
        /// The wake-up timer and its time.
        var timer: (token: UInt64, at: Date)?
        /// The earliest time asked for while handling the current inputs (the timer is set after them).
        var wanted: Date?
        /// A read of the schedule is under way, or waits for its retry.
        var finding = false
        /// The timer fired while a read was under way: read again once it answers.
        var findAgain = false

        init(start: Date) {
            cursor = TaskScheduleEntry(queueName: "", notBefore: start, position: .max)
        }
    }

    /// The wall-clock time by which a not-before time counts as come: the engine's elapsed time
    /// from the broker's start, plus a millisecond (a timer set for a time fires at that time, and
    /// rounding must not put the head back to wait).
    var dueBy: Date {
        configuration.wallClockAnchor.addingTimeInterval(now.timeInterval + 0.001)
    }

    /// Wakes the broker at `date` at the latest.
    mutating func wake(at date: Date) {
        schedule.wanted = min(schedule.wanted ?? date, date)
    }

    /// Sets the wake-up timer for the earliest time asked for, if it is earlier than the timer's.
    mutating func setWakeTimer(into out: inout [Output]) {
        guard let wanted = schedule.wanted else { return }
        schedule.wanted = nil
        guard phase == .running else { return }
        if let timer = schedule.timer {
            guard wanted < timer.at else { return }
            cancelTimer(timer.token, into: &out)
        }
        schedule.timer = (startTimer(.wake, .until(wanted), into: &out), wanted)
    }

    /// The wake-up timer fired: read the schedule up to now.
    mutating func woke(_ token: UInt64, into out: inout [Output]) {
        guard schedule.timer?.token == token else { return }
        schedule.timer = nil
        findScheduled(into: &out)
    }

    mutating func findScheduled(into out: inout [Output]) {
        guard phase == .running else { return }
        guard !schedule.finding else {
            schedule.findAgain = true
            return
        }
        schedule.finding = true
        out.append(.findScheduled(after: schedule.cursor, through: dueBy))
    }

    /// The schedule answered: the queues whose time came (those this broker runs), the last entry
    /// read, whether that was all up to `through`, and the next not-before time after it.
    mutating func scheduled(_ queueNames: [String], last: TaskScheduleEntry?, through: Date, next: Date?, complete: Bool, into out: inout [Output]) {
        schedule.finding = false
        recovered(.load, [], into: &out)
        for queueName in queueNames {
            if queues[queueName] != nil {
                markReady(queueName)
            } else if !unreadSet.contains(queueName), !ignored.contains(queueName) {
                switch accepts(queueName) {
                case .runs: learned(queueName)
                case .refused: ignored.insert(queueName)
                case .ownedElsewhere: break
                }
            }
        }
        if complete {
            schedule.cursor = TaskScheduleEntry(queueName: "", notBefore: through, position: .max)
            if let next { wake(at: next) }
        } else if let last {
            schedule.cursor = last
        }
        if !complete || schedule.findAgain {
            schedule.findAgain = false
            findScheduled(into: &out)
        }
    }

    mutating func scheduleFailed(message: String, into out: inout [Output]) {
        let delay = backoff(after: .load)
        _ = startTimer(.retrySchedule, .after(delay), into: &out)
        out.append(.emit(.storageFailed(operation: .load, queueNames: [], message: message, retryIn: delay)))
    }
}
