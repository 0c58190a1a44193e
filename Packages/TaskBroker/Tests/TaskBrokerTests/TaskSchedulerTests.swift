import AsyncPrimitivesTesting
import Foundation
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import ServiceLifecycleTestKit
import TaskBroker
import Testing

/// `TaskScheduler` on both backends, with a manual clock: each tick is enqueued once and run,
/// missed ticks follow their schedule's policy across a restart, and neither a second scheduler
/// nor a clock that jumps back enqueues a tick twice.
@Suite(.timeLimit(.minutes(3)))
struct TaskSchedulerTests {
    /// A multiple of 60 seconds since 1970: the ticks of `every(5 s)` and `every(60 s)` fall on it.
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    private static func every(_ seconds: Int64, _ name: String = "s", missed: TaskSchedule.MissedTicks = .runLatest) throws -> TaskSchedule {
        try TaskSchedule(name, .every(.seconds(seconds)), missedTicks: missed) { tick in TestAction(key: tick.key, queueName: "h-\(tick.schedule)") }
    }

    @Test(arguments: Backend.allCases) func eachTickSavesItsActionOnceAndABrokerRunsIt(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let run = try SchedulerRun(database: database, schedules: [try Self.every(5)], start: start)
        for round in 1...3 {
            await run.advance(by: .seconds(5))
            _ = await run.events.values(count: round)
        }
        let expected = (1...3).map { TaskTick(schedule: "s", date: start.addingTimeInterval(Double(5 * $0))).key }
        #expect(await run.enqueued(afterEvents: 3) == expected)
        #expect(await handler.handled.values(count: 3) == expected)
        #expect(expected.first == "s@2027-01-15T08:00:05Z")
        let state = try #require(try await database.schedules().first)
        #expect(state.name == "s" && state.recurrence == "every 5.0 seconds")
        #expect(state.lastTick == start.addingTimeInterval(15) && state.lastKey == expected.last && state.nextTick == start.addingTimeInterval(20))
        await run.stop()
        await broker.shutdown()
    }

    /// Every scheduler down for ten minutes: on the restart, the schedule that runs its latest
    /// missed tick enqueues that one tick at once (not ten); the one that skips waits for its next.
    @Test(arguments: Backend.allCases) func missedTicksRunTheLatestOnceOrAreSkipped(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let schedules = [try Self.every(60, "latest"), try Self.every(60, "skip", missed: .skip)]
        let first = try SchedulerRun(database: database, schedules: schedules, start: start.addingTimeInterval(-30))
        await first.advance(by: .seconds(30))
        #expect(await first.enqueued(afterEvents: 2).sorted() == ["latest@2027-01-15T08:00:00Z", "skip@2027-01-15T08:00:00Z"])
        await first.stop()

        let restarted = try SchedulerRun(database: try await store.open(), schedules: schedules, start: start.addingTimeInterval(10 * 60 + 30))
        #expect(await restarted.enqueued(afterEvents: 1) == ["latest@2027-01-15T08:10:00Z"])
        await restarted.advance(by: .seconds(30))
        #expect(await restarted.enqueued(afterEvents: 3).dropFirst().sorted() == ["latest@2027-01-15T08:11:00Z", "skip@2027-01-15T08:11:00Z"])
        await restarted.stop()
        let keys = try await database.snapshot().map(\.name)
        #expect(keys == ["h-latest", "h-skip"])
        #expect(try await database.snapshot().map(\.pending) == [3, 2], "08:00, 08:10 and 08:11; 08:00 and 08:11")
    }

    /// Two schedulers on one database (two processes, as far as storage can tell), the second's
    /// wall clock 3 s behind: it enqueues 08:00:00, which the first started after, and finds
    /// 08:00:05 recorded by the first. Then a scheduler restarts with its wall clock a minute
    /// back: it enqueues nothing again, and goes on from the last recorded tick.
    @Test(arguments: Backend.allCases) func aSecondSchedulerAndAClockThatJumpsBackEnqueueNoTickTwice(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ManualClock()
        let ahead = try SchedulerRun(database: database, schedules: [try Self.every(5)], start: start, clock: clock)
        let behind = try SchedulerRun(database: try await store.open(), schedules: [try Self.every(5)], start: start.addingTimeInterval(-3), clock: clock)
        let tick = { (seconds: Double) in TaskTick(schedule: "s", date: self.start.addingTimeInterval(seconds)) }
        for (step, expectedBehind, expectedAhead) in [
            (3, [TaskSchedulerEvent.enqueued(tick(0), key: tick(0).key)], [TaskSchedulerEvent]()),
            (2, [.enqueued(tick(0), key: tick(0).key)], [.enqueued(tick(5), key: tick(5).key)]),
            (3, [.enqueued(tick(0), key: tick(0).key), .recordedElsewhere(tick(5))], [.enqueued(tick(5), key: tick(5).key)]),
            (2, [.enqueued(tick(0), key: tick(0).key), .recordedElsewhere(tick(5))], [.enqueued(tick(5), key: tick(5).key), .enqueued(tick(10), key: tick(10).key)]),
        ] {
            await clock.sleepers(atLeast: 2)
            clock.advance(by: .seconds(step))
            #expect(await behind.events.values(count: expectedBehind.count) == expectedBehind)
            #expect(await ahead.events.values(count: expectedAhead.count) == expectedAhead)
        }
        await ahead.stop()
        await behind.stop()

        let again = try SchedulerRun(database: database, schedules: [try Self.every(5)], start: start.addingTimeInterval(-50))
        await again.advance(by: .seconds(65))
        #expect(await again.events.values(count: 1) == [.enqueued(tick(15), key: tick(15).key)])
        #expect(try await database.snapshot().first?.pending == 4, "08:00:00, :05, :10 and :15, once each")
        await again.stop()
    }

    /// A tick that cannot be recorded (the database is down) is tried again after the backoff,
    /// as the latest tick by then: nothing is lost, nothing piles up.
    @Test(arguments: Backend.allCases) func aTickThatFailsToRecordIsTriedAgain(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let flaky = FlakyStorage(try await store.open().storage, failing: [:])
        flaky.tickFailuresLeft.withLock { $0 = 1 }
        let database = TaskDatabase(storage: flaky)
        let run = try SchedulerRun(database: database, schedules: [try Self.every(5)], start: start)
        await run.advance(by: .seconds(5))
        let failed = try #require(await run.events.values(count: 1).first)
        guard case .failed(let tick, let message, let retryIn) = failed else {
            Issue.record("the first event is the failure: \(failed)")
            return
        }
        #expect(tick == TaskTick(schedule: "s", date: start.addingTimeInterval(5)) && message.contains("injected tick failure") && retryIn == .seconds(1))
        await run.advance(by: .seconds(1))
        #expect(await run.enqueued(afterEvents: 2) == ["s@2027-01-15T08:00:05Z"])
        await run.stop()
    }

    /// A graceful shutdown that begins while a tick is being recorded lets that tick finish (stored,
    /// with its event) and then ends the run, where cancelling the recording would leave it unknown
    /// whether the tick was stored.
    @Test(arguments: Backend.allCases) func aGracefulShutdownLetsTheTickBeingRecordedFinish(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let flaky = FlakyStorage(try await store.open().storage, failing: [:])
        flaky.holdsNextTick.withLock { $0 = true }
        let database = TaskDatabase(storage: flaky)
        let clock = ManualClock()
        let wall = WallClock(start: start, clock: clock)
        let scheduler = try TaskScheduler(
            database: database, schedules: [try Self.every(5)], configuration: .init(wallClock: { wall.now }), clock: clock
        )
        let events = scheduler.events
        try await testGracefulShutdown { trigger in
            async let ran: Void = scheduler.run()
            await clock.sleepers(atLeast: 1)
            clock.advance(by: .seconds(5))
            #expect(await flaky.ticksHeld.values(count: 1) == [start.addingTimeInterval(5)])
            trigger.triggerGracefulShutdown()
            flaky.releaseHeldTick()
            try await ran
        }
        var seen: [TaskSchedulerEvent] = []
        for await event in events { seen.append(event) }
        #expect(seen == [.enqueued(TaskTick(schedule: "s", date: start.addingTimeInterval(5)), key: "s@2027-01-15T08:00:05Z")])
        #expect(try await database.snapshot().map(\.pending) == [1])
        #expect(try await database.schedules().first?.lastTick == start.addingTimeInterval(5))
    }

    @Test func twoSchedulesWithOneNameOrNoneAreRefused() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        #expect { try TaskScheduler(database: database, schedules: [try Self.every(5), try Self.every(60)]) } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidArgument && "\(error)".contains("\"s\"")
        }
        #expect { try TaskScheduler(database: database, schedules: []) } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidArgument
        }
    }

    /// A backend without schedules says so at once instead of retrying for ever.
    @Test func aBackendWithoutSchedulesIsRefusedAtOnce() async throws {
        let store = try TestStore(.sqlite)
        let database = TaskDatabase(storage: GatedStorage(try await store.open().storage, holdingReadsOf: []))
        let scheduler = try TaskScheduler(database: database, schedules: [try Self.every(5)])
        await #expect { try await scheduler.run() } throws: { error in
            (error as? TaskBrokerError)?.code == .unsupported
        }
    }
}
