// AsyncPrimitives against SwiftNIO's EventLoopFuture, measured in the same run.
//
// Issue target: within 2x of NIO per link, and no growth in per-link cost from 10,000 to
// 1,000,000 links. Each figure is the best of several runs; "ns/link" divides the whole
// time (building the chain, filling it, running every link, observing the end) by the
// number of links.
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

let repetitions = 5
let clock = ContinuousClock()

/// The best of `repetitions` timings of `body`, in nanoseconds per operation.
func best(_ operations: Int, _ body: () async throws -> Void) async rethrows -> Double {
    var fastest = Duration.seconds(3600)
    for _ in 0..<repetitions {
        let elapsed = try await clock.measure { try await body() }
        fastest = min(fastest, elapsed)
    }
    let (seconds, attoseconds) = fastest.components
    let nanoseconds = Double(seconds) * 1e9 + Double(attoseconds) / 1e9
    return nanoseconds / Double(operations)
}

func format(_ value: Double) -> String {
    let rounded = (value * 10).rounded() / 10
    return "\(rounded)"
}

func report(_ name: String, ours: Double, nio: Double, target: Double) {
    let ratio = ours / nio
    let verdict = ratio <= target ? "meets" : "MISSES"
    print("  \(name): ours \(format(ours)) ns, NIO \(format(nio)) ns, ratio \(format(ratio))x  (target <= \(format(target))x: \(verdict))")
}

/// A counter the observing handlers add to.
final class Counter: Sendable {
    let total = Atomic<Int>(0)
    func add(_ value: Int) { total.wrappingAdd(value, ordering: .relaxed) }
}

let queue = DispatchQueue(label: "bench.callbacks")
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let loop = group.next()

// MARK: Chains of maps

func ourChain(links: Int) async throws {
    let start = DeferredResult<Int>()
    var future: FutureResult<Int> = start
    for _ in 0..<links {
        future = future.pipe(upon: queue) { $0 &+ 1 }
    }
    start.success(value: 0)
    let value = try await future.value
    precondition(value == links)
}

func nioChain(links: Int) async throws {
    let end = try await loop.submit { () -> EventLoopFuture<Int> in
        let promise = loop.makePromise(of: Int.self)
        var future = promise.futureResult
        for _ in 0..<links {
            future = future.map { $0 &+ 1 }
        }
        promise.succeed(0)
        return future
    }.get()
    let value = try await end.get()
    precondition(value == links)
}

@inline(never)
func step(_ value: Int) async -> Int {
    value &+ 1
}

func asyncChain(links: Int) async {
    var value = 0
    for _ in 0..<links {
        value = await step(value)
    }
    precondition(value == links)
}

// MARK: Create, fill, observe

func ourFutures(count: Int, counter: Counter) async {
    let done = Deferred<Void>()
    // Run the loop inside a handler on `queue`, as the NIO loop runs on its event loop.
    Future(value: ()).then(upon: queue) { _ in
        for index in 0..<count {
            let deferred = Deferred<Int>()
            deferred.then(upon: queue) { counter.add($0) }
            deferred.fill(value: index)
        }
        queue.async { done.fill(value: ()) }
    }
    await done.value
}

func ourFuturesFilledFromOutside(count: Int, counter: Counter) async {
    let done = Deferred<Void>()
    for index in 0..<count {
        let deferred = Deferred<Int>()
        if index == count - 1 {
            // Handlers for one queue run in fill order, so the last one ends the run. (A
            // `queue.async` here could run before handlers still waiting in a batch.)
            deferred.then(upon: queue) { value in
                counter.add(value)
                done.fill(value: ())
            }
        } else {
            deferred.then(upon: queue) { counter.add($0) }
        }
        deferred.fill(value: index)
    }
    await done.value
}

func nioFutures(count: Int, counter: Counter) async throws {
    try await loop.submit {
        for index in 0..<count {
            let promise = loop.makePromise(of: Int.self)
            promise.futureResult.whenSuccess { counter.add($0) }
            promise.succeed(index)
        }
    }.get()
}

// MARK: Run

// The default callback queue is the main queue; in this async `main` program it is served.
let mainQueueCheck = try await FutureResult(value: 41).pipe { $0 + 1 }.value
precondition(mainQueueCheck == 42)
print("AsyncPrimitives benchmarks (best of \(repetitions); main-queue handlers work in async main: yes)")

// `QUEUEKIT_BENCH_PROFILE=chain` (or `seed`) runs only our side of that row, for a profiler;
// `nio-chain` (or `nio-seed`) only NIO's side. `QUEUEKIT_BENCH_COUNT` links or futures per run
// (default 1,000,000), `QUEUEKIT_BENCH_RUNS` runs (default 10): two counts under
// `valgrind --tool=callgrind` give instructions per link or future from their difference.
func environment(_ name: String, default value: Int) -> Int {
    getenv(name).flatMap { Int(String(cString: $0)) } ?? value
}
if let profile = getenv("QUEUEKIT_BENCH_PROFILE").map({ String(cString: $0) }) {
    let count = environment("QUEUEKIT_BENCH_COUNT", default: 1_000_000)
    let runs = environment("QUEUEKIT_BENCH_RUNS", default: 10)
    for _ in 0..<runs {
        switch profile {
        case "chain": try await ourChain(links: count)
        case "seed": await ourFuturesFilledFromOutside(count: count, counter: Counter())
        case "nio-chain": try await nioChain(links: count)
        case "nio-seed": try await nioFutures(count: count, counter: Counter())
        default:
            print("QUEUEKIT_BENCH_PROFILE: chain, seed, nio-chain or nio-seed, not \(profile)")
            exit(64)
        }
    }
    try await group.shutdownGracefully()
    exit(0)
}

print("Chained maps (FutureResult.pipe(upon:into:) vs EventLoopFuture.map on one event loop vs plain async calls)")
var perLink: [Int: Double] = [:]
for links in [10_000, 1_000_000] {
    let ours = try await best(links) { try await ourChain(links: links) }
    let nio = try await best(links) { try await nioChain(links: links) }
    let plain = await best(links) { await asyncChain(links: links) }
    perLink[links] = ours
    // The seed-style target for long chains: at or below NIO's cost per link.
    report("\(links) links, per link", ours: ours, nio: nio, target: links >= 1_000_000 ? 1.0 : 2.0)
    print("    plain async call: \(format(plain)) ns per link")
}
if let short = perLink[10_000], let long = perLink[1_000_000] {
    let growth = long / short
    print("  growth of our per-link cost from 10,000 to 1,000,000 links: \(format(growth))x (target: no growth, ~1.0x)")
}

print("Create, fill and observe futures (Deferred vs EventLoopPromise)")
let futures = 1_000_000
let counter = Counter()
let oursFutures = await best(futures) { await ourFutures(count: futures, counter: counter) }
let nioPromises = try await best(futures) { try await nioFutures(count: futures, counter: counter) }
report("\(futures) futures, filled on the handler queue, per future", ours: oursFutures, nio: nioPromises, target: 2.0)
// The seed's way: `Deferred<Int>()`, `then(upon: queue)`, `fill` from another thread (this
// task), against a NIO promise made, observed and succeeded on its own loop.
let outside = await best(futures) { await ourFuturesFilledFromOutside(count: futures, counter: counter) }
report("\(futures) futures, seed style: Deferred + then(upon: queue) + fill from another thread, per future", ours: outside, nio: nioPromises, target: 2.0)

try await group.shutdownGracefully()
