import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Synchronization
import Testing

/// How `then(upon:)` handlers that become ready together are run: joined into one dispatched
/// block per queue, yet in order, on the queue they asked for, without deadlock or leak.
@Suite(.timeLimit(.minutes(1)))
struct SchedulerTests {
    /// On Linux every read of `DispatchQueue.main` makes a new `DispatchQueue` value; handlers
    /// bound to the main queue through different values still run in the order their futures
    /// were filled (a handler must not join an earlier block past one dispatched after it).
    @Test func handlersForOneQueueNamedByDifferentValuesRunInFillOrder() async {
        nameMainQueue()
        let stored = DispatchQueue.main
        let order = EventCollector<Int>()
        let wrongQueue = EventCollector<Int>()
        let count = 900
        let deferreds = (0..<count).map { _ in Deferred<Int>() }
        for (index, deferred) in deferreds.enumerated() {
            // Not `CallbackQueue.default`: `CallbackQueueTests` changes it for a moment, and runs
            // alongside this suite.
            let queue: DispatchQueue = index.isMultiple(of: 2) ? stored : DispatchQueue.main
            deferred.then(upon: queue) { value in
                if currentQueueName() != "main" { wrongQueue.record(value) }
                order.record(value)
            }
        }
        DispatchQueue.global().async {
            for (index, deferred) in deferreds.enumerated() {
                deferred.fill(value: index)
            }
        }
        #expect(await order.values(count: count) == Array(0..<count))
        #expect(wrongQueue.values.isEmpty)
    }

    /// A handler that fills futures bound for its own queue under different values: their
    /// handlers run after it, in fill order.
    @Test func aHandlerFillingFuturesForItsOwnQueueUnderDifferentValuesKeepsTheirOrder() async {
        nameMainQueue()
        let stored = DispatchQueue.main
        let order = EventCollector<String>()
        let start = Deferred<Void>()
        let filled = (0..<6).map { _ in Deferred<Int>() }
        for (index, deferred) in filled.enumerated() {
            deferred.then(upon: index.isMultiple(of: 2) ? stored : DispatchQueue.main) { value in
                order.record("\(currentQueueName() ?? "?") \(value)")
            }
        }
        start.then(upon: stored) { _ in
            for (index, deferred) in filled.enumerated() {
                deferred.fill(value: index)
            }
            order.record("filler")
        }
        start.fill(value: ())
        #expect(await order.values(count: 7) == ["filler"] + (0..<6).map { "main \($0)" })
    }

    /// Handlers filled from several threads for several queues, and handlers that fill futures
    /// bound for other queues: each runs on its own queue, and each queue sees one thread's
    /// fills in order.
    @Test func everyHandlerRunsOnTheQueueItAskedForInFillOrder() async {
        let names = ["sched-a", "sched-b", "sched-c"]
        let queues = names.map { namedQueue($0) }
        let seen = EventCollector<String>()
        let perThread = 300
        let threads = 3
        let total = perThread * threads * 2
        var all: [[Deferred<Int>]] = []
        for thread in 0..<threads {
            var deferreds: [Deferred<Int>] = []
            for index in 0..<perThread {
                let target = (thread + index) % queues.count
                let hop = Deferred<Int>()
                let hopTarget = (target + 1) % queues.count
                hop.then(upon: queues[hopTarget]) { value in
                    seen.record("\(names[hopTarget]) \(currentQueueName() ?? "?") hop \(thread) \(value)")
                }
                let deferred = Deferred<Int>()
                deferred.then(upon: queues[target]) { value in
                    seen.record("\(names[target]) \(currentQueueName() ?? "?") \(thread) \(value)")
                    hop.fill(value: value)
                }
                deferreds.append(deferred)
            }
            all.append(deferreds)
        }
        for (thread, deferreds) in all.enumerated() {
            let filler = DispatchQueue(label: "filler-\(thread)")
            filler.async {
                for (index, deferred) in deferreds.enumerated() { deferred.fill(value: index) }
            }
        }
        let records = await seen.values(count: total)
        let misplaced = records.filter { record in
            let words = record.split(separator: " ")
            return words[0] != words[1]
        }
        #expect(misplaced.isEmpty)
        for thread in 0..<threads {
            for name in names {
                let direct = records.filter { $0.hasPrefix("\(name) \(name) \(thread) ") }
                    .map { Int($0.split(separator: " ")[3])! }
                #expect(direct == direct.sorted())
            }
        }
    }

    /// A handler that fills a future bound for its own serial queue, directly or from another
    /// thread while it waits for that fill to return, does not deadlock; the other handler
    /// runs after it, on the same queue.
    @Test(arguments: [false, true])
    func aHandlerFillingAFutureForItsOwnQueueDoesNotDeadlock(fromAnotherThread: Bool) async {
        let queue = namedQueue("self-filling-\(fromAnotherThread)")
        let order = EventCollector<String>()
        let first = Deferred<Int>()
        let second = Deferred<Int>()
        second.then(upon: queue) { value in order.record("second \(value) on \(currentQueueName() ?? "?")") }
        first.then(upon: queue) { value in
            if fromAnotherThread {
                let filled = DispatchSemaphore(value: 0)
                DispatchQueue.global().async {
                    second.fill(value: value + 1)
                    filled.signal()
                }
                order.record(filled.wait(timeout: .now() + 30) == .success ? "fill returned" : "fill stuck")
            } else {
                second.fill(value: value + 1)
                order.record("fill returned")
            }
        }
        DispatchQueue.global().async { first.fill(value: 1) }
        #expect(await order.values(count: 2) == [
            "fill returned", "second 2 on self-filling-\(fromAnotherThread)",
        ])
    }

    /// A handler on a concurrent queue filling futures bound for that queue: all run, on it.
    @Test func handlersOnAConcurrentQueueThatFillEachOtherAllRun() async {
        let queue = namedQueue("concurrent-self", concurrent: true)
        let seen = EventCollector<String>()
        let deferreds = (0..<200).map { _ in Deferred<Int>() }
        for (index, deferred) in deferreds.enumerated() {
            deferred.then(upon: queue) { value in
                seen.record(currentQueueName() ?? "?")
                if index + 1 < deferreds.count { deferreds[index + 1].fill(value: value + 1) }
            }
        }
        DispatchQueue.global().async { deferreds[0].fill(value: 0) }
        #expect(await seen.values(count: 200) == Array(repeating: "concurrent-self", count: 200))
    }

    /// Handlers, and what they capture, are released once they have run: nothing is kept by
    /// a batch or by the thread that filled the future.
    @Test func handlersAndWhatTheyCaptureAreReleasedAfterTheyRun() async {
        let queue = namedQueue("released")
        let released = EventCollector<Int>()
        let ran = EventCollector<Int>()
        let count = 50
        let deferreds = (0..<count).map { _ in Deferred<Int>() }
        for (index, deferred) in deferreds.enumerated() {
            let probe = DeinitProbe { released.record(index) }
            deferred.then(upon: queue) { value in
                withExtendedLifetime(probe) { ran.record(value) }
            }
        }
        DispatchQueue.global().async {
            for (index, deferred) in deferreds.enumerated() { deferred.fill(value: index) }
        }
        #expect(await ran.values(count: count) == Array(0..<count))
        #expect(await released.values(count: count).sorted() == Array(0..<count))
    }

    /// A handler that dispatches a handler elsewhere (here: the main queue under another
    /// `DispatchQueue` value) and then lets another thread fill a future bound for its own
    /// queue: that future's handler must not join the running block ahead of the one dispatched.
    @Test func aHandlerReadyAfterAnotherWasDispatchedDoesNotOvertakeIt() async {
        nameMainQueue()
        let stored = DispatchQueue.main
        let order = EventCollector<String>()
        let first = Deferred<Int>()
        let elsewhere = Deferred<Int>()
        let later = Deferred<Int>()
        let elsewhereFilled = DispatchSemaphore(value: 0)
        let laterFilled = DispatchSemaphore(value: 0)
        elsewhere.then(upon: DispatchQueue.main) { _ in order.record("elsewhere") }
        later.then(upon: stored) { _ in order.record("later") }
        first.then(upon: stored) { _ in
            elsewhere.fill(value: 1)
            elsewhereFilled.signal()
            // Keep this block running until the other thread has filled `later`.
            let filled = laterFilled.wait(timeout: .now() + 30) == .success
            order.record(filled ? "first" : "first (later never filled)")
        }
        let filler = DispatchQueue(label: "overtake-filler")
        filler.async {
            first.fill(value: 0)
            _ = elsewhereFilled.wait(timeout: .now() + 30)
            later.fill(value: 2)
            laterFilled.signal()
        }
        #expect(await order.values(count: 3) == ["first", "elsewhere", "later"])
    }
}
