import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Synchronization
import Testing

/// How the links of a chain run when each link fills the next future on the queue it is
/// running on: the next handler waits in the running block (no job of its own), yet keeps
/// every rule a handler follows.
@Suite(.timeLimit(.minutes(1)))
struct ChainLinkTests {
    private enum StepError: Error, Equatable {
        case step(Int)
    }

    /// A handler filling a future whose one handler is for the same queue: that handler runs
    /// after the filling handler returns, not inside `fill`, and before a handler attached
    /// right after the fill.
    @Test func aFutureFilledInsideAHandlerRunsItsHandlerAfterThatHandlerInOrder() async {
        let queue = namedQueue("fill-inside-handler")
        let log = EventLog<String>()
        let done = EventCollector<Void>()
        let inner = DeferredResult<Int>()
        inner.then(upon: queue) { result in
            log.append("first handler \((try? result.get()) ?? -1) on \(currentQueueName() ?? "?")")
        }
        FutureResult<Int>(value: 0).then(upon: queue) { _ in
            log.append("filling")
            let filled = inner.success(value: 7)
            let refilled = inner.success(value: 8)
            log.append("filled \(filled), refilled \(refilled)")
            inner.then(upon: queue) { result in
                log.append("second handler \((try? result.get()) ?? -1) on \(currentQueueName() ?? "?")")
                done.record(())
            }
            log.append("attached")
        }
        _ = await done.values(count: 1)
        #expect(log.values == [
            "filling",
            "filled true, refilled false",
            "attached",
            "first handler 7 on fill-inside-handler",
            "second handler 7 on fill-inside-handler",
        ])
    }

    /// Value links (`pipe` with a function returning a value, throwing or not) each run on the
    /// queue given, in chain order, also when consecutive links alternate between queues.
    @Test(arguments: [false, true])
    func valueLinksRunInOrderOnTheQueueGiven(alternatingQueues: Bool) async throws {
        let first = namedQueue("links-a")
        let second = alternatingQueues ? namedQueue("links-b") : first
        let steps = EventLog<Int>()
        let misplaced = EventLog<Int>()
        let start = DeferredResult<Int>()
        var future: FutureResult<Int> = start
        let links = 10_000
        for index in 0..<links {
            let queue = index.isMultiple(of: 2) ? first : second
            let expected = index.isMultiple(of: 2) ? "links-a" : (alternatingQueues ? "links-b" : "links-a")
            let step: @Sendable (Int) -> Void = { value in
                steps.append(value)
                if currentQueueName() != expected { misplaced.append(index) }
            }
            if index.isMultiple(of: 3) {
                future = future.pipe(upon: queue) { (value: Int) throws -> Int in
                    step(value)
                    return value + 1
                }
            } else {
                future = future.pipe(upon: queue) { (value: Int) -> Int in
                    step(value)
                    return value + 1
                }
            }
        }
        start.success(value: 0)
        #expect(try await future.value == links)
        #expect(steps.values == Array(0..<links))
        #expect(misplaced.values.isEmpty)
    }

    /// An early failure in a long chain of value links skips every function and reaches the
    /// end unchanged; an error thrown halfway does the same for the links after it.
    @Test func aLongChainOfValueLinksSkipsEveryFunctionAfterAFailure() async {
        let queue = DispatchQueue(label: "failed-value-chain")
        let calls = Atomic<Int>(0)
        let start = DeferredResult<Int>()
        var future: FutureResult<Int> = start
        for index in 0..<100_000 {
            if index == 50_000 {
                future = future.pipe(upon: queue) { (_: Int) throws -> Int in
                    calls.add(1, ordering: .relaxed)
                    throw StepError.step(index)
                }
            } else {
                future = future.pipe(upon: queue) { (value: Int) -> Int in
                    calls.add(1, ordering: .relaxed)
                    return value + 1
                }
            }
        }
        start.failure(error: StepError.step(-1))
        await #expect(throws: StepError.step(-1)) { try await future.value }
        #expect(calls.load(ordering: .relaxed) == 0)

        let restart = DeferredResult<Int>()
        var thrown: FutureResult<Int> = restart
        for index in 0..<1_000 {
            thrown = thrown.pipe(upon: queue) { (value: Int) throws -> Int in
                calls.add(1, ordering: .relaxed)
                if index == 500 { throw StepError.step(index) }
                return value + 1
            }
        }
        restart.success(value: 0)
        await #expect(throws: StepError.step(500)) { try await thrown.value }
        #expect(calls.load(ordering: .relaxed) == 501)
    }

    /// A chained function that captures the future `pipe` returned for it is released once it
    /// has run, and so is that future: the function is dropped like a handler.
    @Test func aChainedFunctionThatCapturesItsOwnFutureIsFreedOnceItRan() async {
        let queue = DispatchQueue(label: "release-value-link")
        let done = EventCollector<Int>()
        let weakLink: WeakBox<FutureResult<Int>>
        let weakCaptured: WeakBox<Tracked>
        do {
            let start = DeferredResult<Int>()
            let slot = Mutex<FutureResult<Int>?>(nil)
            let tracked = Tracked("captured by a chained function")
            let link = start.pipe(upon: queue) { (value: Int) -> Int in
                _ = tracked.name
                // The function reaches the future it fills: a cycle until it has run.
                return slot.withLock { $0?.isFilled == false } ? value + 1 : -1
            }
            slot.withLock { $0 = link }
            link.then(upon: queue) { result in done.record((try? result.get()) ?? -2) }
            weakLink = WeakBox(link)
            weakCaptured = WeakBox(tracked)
            start.success(value: 1)
        }
        #expect(await done.values(count: 1) == [2])
        await expectReleased(weakCaptured, after: queue)
        await expectReleased(weakLink, after: queue)
    }
}
