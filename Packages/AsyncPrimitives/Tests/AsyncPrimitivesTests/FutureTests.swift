import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1)))
struct FutureTests {
    @Test func fibonacciFutureIsFilledWithTheNumber() async {
        let numbers = EventCollector<UInt64>()
        let future = calculateFibonacciNumber(63)
        future.then { number in
            numbers.record(number)
        }
        // A multi-statement trailing closure, as in the seed, picks `then(upon:run:)` too.
        future.then { number in
            let text = "\(number)"
            numbers.record(UInt64(text) ?? 0)
        }
        #expect(await numbers.values(count: 2) == [6_557_470_319_842, 6_557_470_319_842])
    }

    @Test func seedChainSumsTheFactorsOfAFibonacciNumber() async {
        // fib(10) = 55 -> factors [1, 5, 11, 55] -> 72
        let factors = await calculateFibonacciNumber(10).then(pipeInto: findFactors(value:)).value
        #expect(factors == [1, 5, 11, 55])
        #expect(await sumOfFactorsForFibonacciNumber(10).value == 72)
    }

    @Test func seedChainWorksWithMethodReferences() async {
        let future = calculateFibonacciNumber(10)
            .then(pipeInto: self.findFactorsMethod(value:))
            .then(pipeInto: self.sumMethod(of:))
        #expect(await future.value == 72)
    }

    @Test func handlerAttachedBeforeTheFillRunsAtTheFill() async {
        let deferred = Deferred<Int>()
        let seen = EventCollector<Int>()
        deferred.then(upon: .global()) { seen.record($0) }
        #expect(seen.count == 0)
        deferred.fill(value: 7)
        #expect(await seen.values(count: 1) == [7])
    }

    @Test func handlerAttachedAfterTheFillRunsAtOnce() async {
        let deferred = Deferred<Int>()
        deferred.fill(value: 3)
        let seen = EventCollector<Int>()
        deferred.then(upon: .global()) { seen.record($0) }
        #expect(await seen.values(count: 1) == [3])
    }

    @Test func aSecondFillReturnsFalseAndChangesNothing() async {
        let deferred = Deferred<String>()
        #expect(deferred.fill(value: "first"))
        #expect(!deferred.fill(value: "second"))
        let seen = EventCollector<String>()
        deferred.then(upon: .global()) { seen.record($0) }
        #expect(await seen.values(count: 1) == ["first"])
        #expect(await deferred.value == "first")
    }

    @Test func handlersNeverRunInsideThenOrFill() async {
        let queue = DispatchQueue(label: "never-inside")
        let order = EventCollector<String>()
        let deferred = Deferred<Int>()
        queue.sync {
            deferred.then(upon: queue) { _ in order.record("handler 1") }
            deferred.fill(value: 1)
            order.record("fill returned")
            deferred.then(upon: queue) { _ in order.record("handler 2") }
            order.record("then returned")
        }
        #expect(await order.values(count: 4) == ["fill returned", "then returned", "handler 1", "handler 2"])
    }

    @Test func aFillInsideAHandlerDoesNotRunTheNextHandlerInline() async {
        let queue = DispatchQueue(label: "fill-in-handler")
        let order = EventCollector<String>()
        let first = Deferred<Int>()
        let second = Deferred<Int>()
        second.then(upon: queue) { _ in order.record("second handler") }
        first.then(upon: queue) { value in
            second.fill(value: value)
            order.record("first handler finished")
        }
        first.fill(value: 1)
        #expect(await order.values(count: 2) == ["first handler finished", "second handler"])
    }

    @Test(arguments: ["serial", "concurrent"])
    func handlersRunInTheOrderTheyWereAdded(kind: String) async {
        let queue = kind == "serial"
            ? DispatchQueue(label: "order")
            : DispatchQueue(label: "order", attributes: .concurrent)
        let deferred = Deferred<Int>()
        let order = EventCollector<Int>()
        for index in 0..<20 {
            deferred.then(upon: queue) { _ in order.record(index) }
        }
        deferred.fill(value: 0)
        #expect(await order.values(count: 20) == Array(0..<20))
    }

    @Test func laterHandlersOnASerialQueueRunInTheOrderAdded() async {
        let queue = DispatchQueue(label: "after-fill-order")
        let deferred = Deferred<Int>()
        deferred.fill(value: 0)
        let order = EventCollector<Int>()
        for index in 0..<20 {
            deferred.then(upon: queue) { _ in order.record(index) }
        }
        #expect(await order.values(count: 20) == Array(0..<20))
    }

    /// Handlers bound for one queue that become ready together (many futures filled from
    /// another thread) share dispatched blocks, and still run on their own queue in the order
    /// their futures were filled; a handler that fills a future bound for the same queue has
    /// that future's handler run right after it, before the next handler of the batch.
    @Test func handlersFilledTogetherFromAnotherThreadRunInFillOrder() async {
        let queue = namedQueue("coalesced")
        let other = namedQueue("coalesced-other")
        let order = EventCollector<String>()
        let count = 2_000
        let deferreds = (0..<count).map { _ in Deferred<Int>() }
        let nested = (0..<count).map { _ in Deferred<Int>() }
        var expectedOnQueue: [String] = []
        var expectedOnOther: [String] = []
        for index in 0..<count {
            let onOther = index.isMultiple(of: 3)
            let fillsNested = !onOther && index % 100 == 1
            nested[index].then(upon: queue) { value in order.record("nested \(value)") }
            deferreds[index].then(upon: onOther ? other : queue) { value in
                order.record("\(currentQueueName() ?? "?") \(value)")
                if fillsNested { nested[value].fill(value: value) }
            }
            if onOther {
                expectedOnOther.append("coalesced-other \(index)")
            } else {
                expectedOnQueue.append("coalesced \(index)")
                if fillsNested { expectedOnQueue.append("nested \(index)") }
            }
        }
        DispatchQueue.global().async {
            for deferred in deferreds.indices {
                deferreds[deferred].fill(value: deferred)
            }
        }
        let seen = await order.values(count: expectedOnQueue.count + expectedOnOther.count)
        #expect(seen.filter { $0.hasPrefix("coalesced-other ") } == expectedOnOther)
        #expect(seen.filter { !$0.hasPrefix("coalesced-other ") } == expectedOnQueue)
    }

    @Test func handlerRunsOnItsUponQueue() async {
        let queue = namedQueue("upon-queue")
        let other = namedQueue("other-queue", concurrent: true)
        let names = EventCollector<String?>()
        let deferred = Deferred<Int>()
        deferred.then(upon: queue) { _ in names.record(currentQueueName()) }
        deferred.pipe(upon: queue) { $0 + 1 }.then(upon: other) { _ in names.record(currentQueueName()) }
        deferred.fill(value: 1)
        #expect(await names.values(count: 2) == ["upon-queue", "other-queue"])
    }

    @Test func pipeIntoBothShapes() async {
        let start = Deferred<Int>()
        let viaFuture: Future<String> = start.pipe(upon: .global()) { value in Future(value: "#\(value)") }
        let viaValue: Future<Int> = start.pipe(upon: .global()) { value in value * 2 }
        let thenFuture: Future<String> = start.then(upon: .global(), pipeInto: { value in Future(value: "#\(value)") })
        let thenValue: Future<Int> = start.then(upon: .global(), pipeInto: { value in value * 3 })
        start.fill(value: 21)
        #expect(await viaFuture.value == "#21")
        #expect(await viaValue.value == 42)
        #expect(await thenFuture.value == "#21")
        #expect(await thenValue.value == 63)
    }

    @Test func pipeIntoAFutureWaitsForThatFuture() async {
        let start = Deferred<Int>()
        let inner = Deferred<String>()
        let chained = start.pipe(upon: .global()) { _ in inner }
        start.fill(value: 1)
        let seen = EventCollector<String>()
        chained.then(upon: .global()) { seen.record($0) }
        inner.fill(value: "inner")
        #expect(await seen.values(count: 1) == ["inner"])
    }

    @Test func elementWiseFilterAndMapOnAFutureOfASequence() async {
        let numbers = Future(value: [1, 2, 3, 4, 5, 6])
        let result = numbers
            .filter(upon: .global()) { $0.isMultiple(of: 2) }
            .map(upon: .global()) { "n\($0)" }
        #expect(await result.value == ["n2", "n4", "n6"])
    }

    @Test func futureFromAnAsyncClosure() async {
        let future = Future { () async -> Int in
            await Task.yield()
            return 99
        }
        #expect(await future.value == 99)
    }

    @Test func aHundredThousandLinkChainCompletesWithoutOverflowingTheStack() async {
        let queue = DispatchQueue(label: "deep-chain")
        let start = Deferred<Int>()
        var future: Future<Int> = start
        for _ in 0..<100_000 {
            future = future.pipe(upon: queue) { $0 + 1 }
        }
        start.fill(value: 0)
        #expect(await future.value == 100_000)
    }

    @Test func aHundredThousandLinkChainOfFuturesCompletes() async {
        let queue = DispatchQueue(label: "deep-future-chain")
        let start = Deferred<Int>()
        var future: Future<Int> = start
        for _ in 0..<100_000 {
            future = future.pipe(upon: queue) { Future(value: $0 + 1) }
        }
        start.fill(value: 0)
        #expect(await future.value == 100_000)
    }

    @Test func aFilledFutureReleasesItsHandlers() async {
        let queue = DispatchQueue(label: "release-handlers")
        let deferred = Deferred<Int>()
        let done = EventCollector<Int>()
        let weak: WeakBox<Tracked>
        do {
            let tracked = Tracked("captured by a handler")
            weak = WeakBox(tracked)
            deferred.then(upon: queue) { value in
                _ = tracked.name
                done.record(value)
            }
        }
        #expect(weak.object != nil)
        deferred.fill(value: 1)
        _ = await done.values(count: 1)
        await expectReleased(weak, after: queue)
    }

    @Test func aChainThatCapturesItsOwnFuturesIsFreedOnceFilled() async {
        let queue = DispatchQueue(label: "release-chain")
        let done = EventCollector<Int>()
        let weakStart: WeakBox<Deferred<Int>>
        let weakEnd: WeakBox<Future<Int>>
        do {
            let start = Deferred<Int>()
            // The handler captures the future it is attached to: a cycle until the fill.
            let end = start.pipe(upon: queue) { value in start.isFilled ? value + 1 : -1 }
            end.then(upon: queue) { value in
                _ = end.isFilled
                done.record(value)
            }
            weakStart = WeakBox(start)
            weakEnd = WeakBox(end)
            start.fill(value: 1)
        }
        #expect(await done.values(count: 1) == [2])
        await expectReleased(weakStart, after: queue)
        await expectReleased(weakEnd, after: queue)
    }

    private func findFactorsMethod(value: UInt64) -> Future<[UInt64]> {
        findFactors(value: value)
    }

    private func sumMethod(of values: [UInt64]) -> UInt64 {
        sum(of: values)
    }
}
