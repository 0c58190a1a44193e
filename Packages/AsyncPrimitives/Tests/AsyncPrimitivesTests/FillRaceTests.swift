import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Testing

/// A fill racing `then` on another thread: whichever wins, every handler runs exactly once,
/// with the value, on its queue. Each race is run many times, the two sides started together.
@Suite(.timeLimit(.minutes(1)))
struct FillRaceTests {
    private static let rounds = 2_000

    /// One handler's report: which race, which handler, on which queue, with which value.
    private struct Report: Hashable, Sendable {
        let round: Int
        let handler: Int
        let queue: String
        let value: Int
    }

    private static func expected(queues: [String]) -> Set<Report> {
        Set((0..<rounds).flatMap { round in
            queues.indices.map { Report(round: round, handler: $0, queue: queues[$0], value: round) }
        })
    }

    @Test func aDeferredFilledWhileAnotherThreadAttachesHandlersRunsEachOnce() async {
        let names = ["race-a", "race-b", "race-a"]
        let queues = names.map { namedQueue($0) }
        let reports = EventCollector<Report>()
        await offThePool {
            for round in 0..<Self.rounds {
                let deferred = Deferred<Int>()
                DispatchQueue.concurrentPerform(iterations: 2) { side in
                    if side == 0 {
                        for (handler, queue) in queues.enumerated() {
                            deferred.then(upon: queue) { value in
                                reports.record(Report(
                                    round: round, handler: handler, queue: currentQueueName() ?? "?", value: value
                                ))
                            }
                        }
                    } else {
                        deferred.fill(value: round)
                    }
                }
            }
        }
        let all = await reports.values(count: Self.rounds * names.count)
        #expect(all.count == Set(all).count)
        #expect(Set(all) == Self.expected(queues: names))
    }

    @Test func aDeferredResultFilledWhileAnotherThreadAttachesHandlersRunsEachOnce() async {
        let names = ["result-race-a", "result-race-b"]
        let queues = names.map { namedQueue($0) }
        let reports = EventCollector<Report>()
        await offThePool {
            for round in 0..<Self.rounds {
                let deferred = DeferredResult<Int>()
                DispatchQueue.concurrentPerform(iterations: 2) { side in
                    if side == 0 {
                        for (handler, queue) in queues.enumerated() {
                            deferred.then(upon: queue) { result in
                                reports.record(Report(
                                    round: round, handler: handler, queue: currentQueueName() ?? "?",
                                    value: (try? result.get()) ?? -1
                                ))
                            }
                        }
                    } else {
                        deferred.success(value: round)
                    }
                }
            }
        }
        let all = await reports.values(count: Self.rounds * names.count)
        #expect(all.count == Set(all).count)
        #expect(Set(all) == Self.expected(queues: names))
    }

    /// Many futures filled on one thread while another attaches their handlers: those attached
    /// in time are dispatched by the filling thread (joining its blocks), the others by the
    /// attaching thread; each runs once, on its queue.
    @Test func fillsRacingAttachesOfManyFuturesLoseNoHandler() async {
        let queue = namedQueue("race-many")
        let reports = EventCollector<Report>()
        let deferreds = (0..<Self.rounds).map { _ in Deferred<Int>() }
        await offThePool {
            DispatchQueue.concurrentPerform(iterations: 2) { side in
                if side == 0 {
                    for (round, deferred) in deferreds.enumerated() {
                        deferred.then(upon: queue) { value in
                            reports.record(Report(
                                round: round, handler: 0, queue: currentQueueName() ?? "?", value: value
                            ))
                        }
                    }
                } else {
                    for (round, deferred) in deferreds.enumerated() {
                        deferred.fill(value: round)
                    }
                }
            }
        }
        let all = await reports.values(count: Self.rounds)
        #expect(all.count == Set(all).count)
        #expect(Set(all) == Self.expected(queues: ["race-many"]))
    }

    /// Runs the blocking `DispatchQueue.concurrentPerform` races on a Dispatch thread, not on
    /// the cooperative pool, and returns when they are done.
    private func offThePool(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                body()
                continuation.resume()
            }
        }
    }
}
