import AsyncPrimitivesTesting
import Foundation
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite
import TaskBroker
import Testing

/// What a long-running broker must not accumulate. The soak (`make soak`) found the first one:
/// a worker's memory grew ~3 MB a minute under steady work with timed retries.
@Suite(.timeLimit(.minutes(3)))
struct EngineResourceTests {
    @Test(arguments: Backend.allCases) func aTimerThatFiredIsReleased(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ObservedClock()
        let handler = RecordingHandler<TestAction>()
        let retries = 20
        for _ in 0..<retries {
            handler.script("a", .retry(after: .milliseconds(100)))
        }
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler, clock: clock)
        let recorder = EventRecorder(broker)
        try await database.save([TestAction(key: "a", queueName: "h-a")])
        for run in 1...retries {
            _ = await handler.handled.values(count: run)
            // Moves the clock to the next timer, one at a time, until the action runs again: the
            // retry's own, on PostgreSQL a claim's short wait for a lease row that another
            // transaction has locked, and under load a storage operation's retry after a failure
            // (50 ms, then 100, 200…: a window of the retry's 100 ms missed it, and the test
            // waited for a timer in that window until its time limit, once beside the suite).
            // (Advancing by 100 ms at once raced the retry's timer: set after the advance, it was
            // due 100 ms later, for ever.)
            while handler.handled.count == run, !Task.isCancelled {
                let now = clock.now
                let ranAgain = await withTaskGroup(of: Bool.self) { group in
                    group.addTask { await handler.handled.values(count: run + 1).count > run }
                    group.addTask {
                        _ = await clock.sleepers { $0.keys.contains { $0 > now } }
                        return false
                    }
                    let first = await group.next() ?? true
                    group.cancelAll()
                    return first
                }
                guard !ranAgain, handler.handled.count == run,
                      let next = clock.sleepers.keys.filter({ $0 > now }).min() else { continue }
                clock.advance(by: now.duration(to: next))
            }
        }
        _ = await recorder.wait { if case .succeeded = $0 { true } else { false } }
        #expect(handler.handled.count == retries + 1)
        // The view is published after the batch whose events it reports: one more action's
        // success, a batch later, shows the view past the last retry's.
        try await database.save(TestAction(key: "b", queueName: "h-b"))
        _ = await recorder.wait(for: { if case .succeeded = $0 { true } else { false } }, occurrence: 2)
        // Each retry started a timer and each fired: the engine holds none of them. (Other timers
        // may still wait, on PostgreSQL the end of a short wait for a lease row another
        // transaction had locked; the engine holds exactly those the machine waits for.)
        let view = broker.engineView()
        #expect(view.pauseTimers == 0)
        // Changes to the queues are no reason to look for plain parallel actions: one claim at the start.
        #expect(view.parallelClaims <= (backend == .postgres ? 1 : 2), "\(view.parallelClaims) claims of plain parallel actions")
        #expect(view.timers == view.machineTimers, "the engine holds \(view.timers) timers, the machine waits for \(view.machineTimers)")
        await broker.shutdown()
    }

    /// A queue per user (or per upload): names used once. The broker used to keep every queue it
    /// ever ran for its lifetime. It now forgets idle ones once it keeps more than 1,024, and reads
    /// a forgotten queue again when it changes: an action saved into one later still runs.
    @Test(arguments: Backend.allCases) func queuesUsedOnceAreForgotten(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let handler = RecordingHandler<TestAction>()
        let broker = try await TaskQueueBroker.setup(database: database, name: "h", handler: handler)
        let rounds = 30
        let perRound = 100
        for round in 0..<rounds {
            try await database.save((0..<perRound).map { TestAction(key: "\(round)-\($0)", queueName: "h-\(round)-\($0)") })
            _ = await handler.handled.values(count: (round + 1) * perRound)
        }
        #expect(handler.handled.count == rounds * perRound)
        let kept = broker.engineView().queues
        #expect(kept <= 1024 + perRound, "kept \(kept) of \(rounds * perRound) queues")
        // Queues forgotten early on still run what is saved into them.
        try await database.save([TestAction(key: "again", queueName: "h-0-0"), TestAction(key: "again2", queueName: "h-0-0")])
        #expect(await handler.handled.values(count: rounds * perRound + 2).suffix(2) == ["again", "again2"])
        await broker.shutdown()
    }
}
