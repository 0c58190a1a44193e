import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Testing

// Serialized: one test changes the process-wide default that the other checks.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct CallbackQueueTests {
    @Test func handlersWithoutUponRunOnTheMainQueueByDefault() async {
        #expect(CallbackQueue.default.label == DispatchQueue.main.label)
        // On Linux the main queue is served by whichever thread drains it (after
        // `dispatch_main` the main thread itself is gone), so ask the queue, not the thread.
        nameMainQueue()
        let names = EventCollector<String?>()
        let deferred = Deferred<Int>()
        deferred.then { _ in names.record(currentQueueName()) }
        FutureResult<Int>(result: .success(1)).then { _ in names.record(currentQueueName()) }
        deferred.fill(value: 1)
        #expect(await names.values(count: 2) == ["main", "main"])
    }

    @Test func aServerCanChangeTheDefaultQueue() async {
        let serverQueue = namedQueue("server-callbacks")
        CallbackQueue.default = serverQueue
        defer { CallbackQueue.default = .main }
        let names = EventCollector<String?>()
        let deferred = Deferred<Int>()
        deferred.then { _ in names.record(currentQueueName()) }
        FutureResult(value: 2).pipe { $0 + 1 }.then { _ in names.record(currentQueueName()) }
        deferred.fill(value: 1)
        #expect(await names.values(count: 2) == ["server-callbacks", "server-callbacks"])
    }
}
