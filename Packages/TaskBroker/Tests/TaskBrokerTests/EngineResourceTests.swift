import AsyncPrimitivesTesting
import Foundation
@testable import TaskBroker
import Testing

/// What a long-running broker must not accumulate. The soak (`make soak`) found the first one:
/// a worker's memory grew ~3 MB a minute under steady work with timed retries.
@Suite(.timeLimit(.minutes(1)))
struct EngineResourceTests {
    @Test(arguments: Backend.allCases) func aTimerThatFiredIsReleased(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        let clock = ManualClock()
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
            await clock.sleepers(atLeast: 1)
            clock.advance(by: .milliseconds(100))
        }
        _ = await recorder.wait { if case .succeeded = $0 { true } else { false } }
        #expect(handler.handled.count == retries + 1)
        // Each retry started a timer and each fired: the engine holds none of them.
        #expect(broker.engineView().timers == 0)
        await broker.shutdown()
    }
}
