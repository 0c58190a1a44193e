import Foundation

/// Which tick of which schedule to record when, given what storage answered: the scheduler's
/// decisions as a pure value (``TaskScheduler`` only sleeps, reads the wall clock and records).
struct SchedulePlan {
    struct Entry {
        let schedule: TaskSchedule
        /// The next tick to record; `nil` once the recurrence has no more.
        var due: Date?
        /// After a failed attempt to record: not before this.
        var retryAt: Date?
        var failures = 0
    }

    private(set) var entries: [Entry]

    /// Plans from each schedule's stored last tick. A schedule with ticks missed since then
    /// (every scheduler was down) records its latest missed tick at once when its policy is
    /// ``TaskSchedule/MissedTicks/runLatest``; otherwise its first tick is the next one.
    init(schedules: [TaskSchedule], lastTicks: [String: Date], now: Date) {
        entries = schedules.map { schedule in
            let last = lastTicks[schedule.name]
            if let last, schedule.missedTicks == .runLatest,
               let missed = schedule.recurrence.latestTick(atOrBefore: now, after: last) {
                return Entry(schedule: schedule, due: missed)
            }
            // A last tick ahead of this process's clock: another's clock runs ahead; go on from it.
            return Entry(schedule: schedule, due: schedule.recurrence.nextTick(after: max(now, last ?? now)))
        }
    }

    /// The ticks to record now, by entry index: for each schedule whose tick has come, its latest
    /// tick by `now` (a scheduler that slept past several ticks records the last of them once).
    func due(at now: Date) -> [(index: Int, tick: Date)] {
        entries.indices.compactMap { index in
            let entry = entries[index]
            guard let due = entry.due, due <= now, entry.retryAt.map({ $0 <= now }) ?? true else { return nil }
            let latest = entry.schedule.recurrence.latestTick(atOrBefore: now, after: due) ?? due
            return (index, latest)
        }
    }

    /// Storage recorded `tick` (or found `recordedThrough`, a later one, recorded already).
    mutating func recorded(_ index: Int, tick: Date, recordedThrough: Date? = nil) {
        entries[index].due = entries[index].schedule.recurrence.nextTick(after: max(tick, recordedThrough ?? tick))
        entries[index].retryAt = nil
        entries[index].failures = 0
    }

    /// Recording failed: tried again after `delay(failures)`.
    mutating func failed(_ index: Int, now: Date, delay: (Int) -> Duration) -> Duration {
        entries[index].failures += 1
        let wait = delay(entries[index].failures)
        entries[index].retryAt = now.addingTimeInterval(wait.timeInterval)
        return wait
    }

    /// When something is next due; `nil` when no schedule has another tick.
    var nextWake: Date? {
        entries.compactMap { entry in entry.due.map { max($0, entry.retryAt ?? $0) } }.min()
    }

    /// The next tick of each schedule (what storage lists).
    func states() -> [TaskScheduleState] {
        entries.map { TaskScheduleState(name: $0.schedule.name, recurrence: $0.schedule.recurrence.description, nextTick: $0.due) }
    }
}
