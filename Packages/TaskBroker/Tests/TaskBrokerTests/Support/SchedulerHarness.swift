import AsyncPrimitivesTesting
import Foundation
import Synchronization
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker

/// A ``TaskScheduler`` running in a task of its own on a manual clock, with a wall clock that
/// follows the manual one from `start` (and can be set back or forward), and its events collected.
final class SchedulerRun: Sendable {
    let clock: ManualClock
    let scheduler: TaskScheduler
    let events = EventCollector<TaskSchedulerEvent>()
    private let wall: WallClock
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(database: TaskDatabase, schedules: [TaskSchedule], start: Date, clock: ManualClock = ManualClock()) throws {
        self.clock = clock
        let wall = WallClock(start: start, clock: clock)
        self.wall = wall
        scheduler = try TaskScheduler(
            database: database, schedules: schedules,
            configuration: .init(
                wallClock: { wall.now },
                storageRetryBackoff: .init(initial: .seconds(1), maximum: .seconds(1))
            ),
            clock: clock
        )
        let stream = scheduler.events
        let events = events
        let scheduler = scheduler
        task.withLock {
            $0 = Task {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { for await event in stream { events.record(event) } }
                    group.addTask { try? await scheduler.run() }
                }
            }
        }
    }

    /// Waits until the scheduler sleeps, then moves both clocks forward.
    func advance(by duration: Duration) async {
        await clock.sleepers(atLeast: 1)
        clock.advance(by: duration)
    }

    /// The keys of the ticks enqueued so far, once `count` events have come.
    func enqueued(afterEvents count: Int) async -> [String] {
        await events.values(count: count).compactMap { event in
            if case .enqueued(_, let key) = event { key } else { nil }
        }
    }

    /// Stops the scheduler and waits for it (its events stream finishes).
    func stop() async {
        let task = task.withLock { $0 }
        task?.cancel()
        await task?.value
    }
}

/// A wall clock that reads `start` plus how far a manual clock has advanced.
final class WallClock: Sendable {
    private let start: Date
    private let clock: ManualClock

    init(start: Date, clock: ManualClock) {
        self.start = start
        self.clock = clock
    }

    var now: Date { start.addingTimeInterval(clock.now.offset.timeInterval) }
}
