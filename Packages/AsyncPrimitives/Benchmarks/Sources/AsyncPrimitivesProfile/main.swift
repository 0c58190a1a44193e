// The benchmark's two issue #16 rows, one side at a time, in a synchronous program for
// `valgrind --tool=callgrind` (valgrind 3.19 crashes on the parked main thread of an async
// `main`). Instruction counts are repeatable where wall-clock times on a shared machine are
// not; run two counts and divide the difference by the difference in count:
//
//     AsyncPrimitivesProfile chain|seed|nio-chain|nio-seed COUNT [RUNS]
import AsyncPrimitives
import Dispatch
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A counter the observing handlers add to.
final class Counter: Sendable {
    let total = Atomic<Int>(0)
    func add(_ value: Int) { total.wrappingAdd(value, ordering: .relaxed) }
}

let queue = DispatchQueue(label: "bench.callbacks")
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let loop = group.next()

/// As the benchmark's `ourChain`: a chain of `pipe` links on `queue`, filled from this thread.
func ourChain(links: Int) {
    let start = DeferredResult<Int>()
    var future: FutureResult<Int> = start
    for _ in 0..<links {
        future = future.pipe(upon: queue) { $0 &+ 1 }
    }
    let done = DispatchSemaphore(value: 0)
    future.then(upon: queue) { result in
        precondition((try? result.get()) == links)
        done.signal()
    }
    start.success(value: 0)
    done.wait()
}

/// As the benchmark's `nioChain`: `EventLoopFuture.map` links built and run on the loop.
func nioChain(links: Int) throws {
    let end = try loop.submit { () -> EventLoopFuture<Int> in
        let promise = loop.makePromise(of: Int.self)
        var future = promise.futureResult
        for _ in 0..<links {
            future = future.map { $0 &+ 1 }
        }
        promise.succeed(0)
        return future
    }.wait()
    let value = try end.wait()
    precondition(value == links)
}

/// As the benchmark's `ourFuturesFilledFromOutside`: made, observed on `queue` and filled here.
func ourFutures(count: Int, counter: Counter) {
    let done = DispatchSemaphore(value: 0)
    for index in 0..<count {
        let deferred = Deferred<Int>()
        if index == count - 1 {
            deferred.then(upon: queue) { value in
                counter.add(value)
                done.signal()
            }
        } else {
            deferred.then(upon: queue) { counter.add($0) }
        }
        deferred.fill(value: index)
    }
    done.wait()
}

/// As the benchmark's `nioFutures`: promises made, observed and succeeded on the loop.
func nioFutures(count: Int, counter: Counter) throws {
    try loop.submit {
        for index in 0..<count {
            let promise = loop.makePromise(of: Int.self)
            promise.futureResult.whenSuccess { counter.add($0) }
            promise.succeed(index)
        }
    }.wait()
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let count = Int(arguments[2]) else {
    print("usage: AsyncPrimitivesProfile chain|seed|nio-chain|nio-seed COUNT [RUNS]")
    exit(64)
}
let runs = arguments.count > 3 ? Int(arguments[3]) ?? 1 : 1
let counter = Counter()
for _ in 0..<runs {
    switch arguments[1] {
    case "chain": ourChain(links: count)
    case "seed": ourFutures(count: count, counter: counter)
    case "nio-chain": try nioChain(links: count)
    case "nio-seed": try nioFutures(count: count, counter: counter)
    default:
        print("unknown case \(arguments[1])")
        exit(64)
    }
}
try group.syncShutdownGracefully()
