import AsyncPrimitivesTesting
import Foundation
import GRDB
import TaskBroker
import Testing

/// `Configuration.rateLimits` on a manual clock (SQLite counts by the broker's wall clock):
/// a prefix's queues share their starts per window, other queues are not held back, a limit per
/// queue counts each queue on its own, and the broker waits for a full window with one timer.
/// (PostgreSQL counts by the server's clock: `PostgresTwoProcessJobTests` measures it.)
@Suite(.timeLimit(.minutes(3)))
struct RateLimitTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// Three starts per 10 s for `h-mail-`: of seven e-mail queues, three start at once; the
    /// window is then full until those starts leave it (10 s, asked 50 ms after: the margin), and
    /// so on; the other queues start at once.
    @Test func aSharedLimitHoldsItsPrefixAndNotOtherQueues() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        let mails = (1...7).map { TestAction(key: "mail-\($0)", queueName: "h-mail-\($0)") }
        try await database.save(mails + [TestAction(key: "other-1", queueName: "h-other-1"), TestAction(key: "other-2", queueName: "h-other-2")])
        let clock = ObservedClock()
        let start = self.start
        var configuration = TaskQueueBroker.Configuration(wallClock: { start })
        configuration.rateLimits = [try TaskRateLimit(prefix: "h-mail-", starts: 3, per: .seconds(10))]
        let began = clock.now
        let startedAt = EventCollector<Duration>()
        let handler = RecordingHandler<TestAction> { action in
            if action.key.hasPrefix("mail-") { startedAt.record(began.duration(to: clock.now)) }
        }
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration, clock: clock)

        // Each time: the broker sleeps until the window has room, and that many e-mails start then.
        let windows: [(started: Int, at: Duration)] = [(3, .zero), (6, .milliseconds(10_050)), (7, .milliseconds(20_100))]
        for (index, window) in windows.enumerated() {
            if index > 0 {
                _ = await clock.sleepers { sleepers in sleepers.keys.contains { $0 > clock.now } }
                #expect(startedAt.count == windows[index - 1].started, "nothing starts before its time")
                let next = try #require(clock.sleepers.keys.filter { $0 > clock.now }.min())
                #expect(began.duration(to: next) == window.at)
                clock.advance(by: clock.now.duration(to: next))
            }
            _ = await startedAt.values(count: window.started)
        }
        let times = await startedAt.values(count: 7)
        #expect(times == [0, 0, 0, 10_050, 10_050, 10_050, 20_100].map { Duration.milliseconds($0) }, "\(times)")
        #expect(Set(await handler.handled.values(count: 9)) == Set(mails.map(\.key) + ["other-1", "other-2"]))
        await broker.shutdown()
    }

    @Test func aLimitPerQueueCountsEachQueueOnItsOwn() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        try await database.save(
            ["a1", "a2", "a3"].map { TestAction(key: $0, queueName: "h-api-a") } + ["b1", "b2"].map { TestAction(key: $0, queueName: "h-api-b") }
        )
        let clock = ManualClock()
        let start = self.start
        var configuration = TaskQueueBroker.Configuration(wallClock: { start })
        configuration.rateLimits = [try TaskRateLimit(prefix: "h-api-", starts: 1, per: .seconds(10), scope: .eachQueue)]
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, configuration: configuration, clock: clock)

        #expect(Set(await handler.handled.values(count: 2)) == ["a1", "b1"])
        await clock.sleepers(atLeast: 2)
        #expect(handler.handled.count == 2, "one start per queue per window")
        clock.advance(by: .milliseconds(10_050))
        #expect(Set(await handler.handled.values(count: 4).dropFirst(2)) == ["a2", "b2"])
        await clock.sleepers(atLeast: 1)
        #expect(handler.handled.count == 4)
        clock.advance(by: .milliseconds(10_050))
        #expect(await handler.handled.values(count: 5).last == "a3")
        await broker.shutdown()
    }

    @Test func aLimitThatAllowsNothingOrHasNoPeriodIsRefused() async throws {
        for (starts, period) in [(0, Duration.seconds(1)), (-5, .seconds(1)), (10, .zero), (10, .seconds(-1)), (10, .microseconds(999))] {
            #expect { try TaskRateLimit(prefix: "mail-", starts: starts, per: period) } throws: { error in
                (error as? TaskBrokerError)?.code == .invalidArgument && "\(error)".contains("\"mail-\"")
            }
        }
        let store = try TestStore(.sqlite)
        var configuration = TaskQueueBroker.Configuration()
        configuration.rateLimits = [
            try TaskRateLimit(prefix: "mail-", starts: 10, per: .seconds(1)),
            try TaskRateLimit(prefix: "mail-", starts: 1, per: .seconds(1), scope: .eachQueue),
        ]
        await #expect {
            try await TaskQueueBroker.setup(database: try await store.open(), name: "h", handler: RecordingHandler<TestAction>(), configuration: configuration)
        } throws: { error in
            (error as? TaskBrokerError)?.code == .invalidArgument && "\(error)".contains("Two rate limits")
        }
    }

    /// A limit per queue over queue names used once: each name's starts are deleted once they
    /// leave the window, whichever bucket is asked next (the table does not grow with the names).
    @Test func startsThatLeftTheirWindowAreDeletedWhicheverBucketIsAsked() async throws {
        let store = try TestStore(.sqlite)
        let database = try await store.open()
        let storage = database.storage
        for index in 0..<50 {
            _ = try await storage.acquireStarts(bucket: "queue:api-\(index)", limit: 2, period: .seconds(10), count: 2, now: start)
        }
        let rows = { try await database.write { tx in try Int.fetchOne(tx.db, sql: "SELECT count(*) FROM taskbroker_rate_start") ?? -1 } }
        #expect(try await rows() == 100)
        _ = try await storage.acquireStarts(bucket: "queue:api-new", limit: 2, period: .seconds(10), count: 1, now: start.addingTimeInterval(10))
        #expect(try await rows() == 1, "only the new bucket's start is left")
    }
}
