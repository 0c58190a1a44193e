import AsyncPrimitives
import AsyncPrimitivesTesting
import Dispatch
import Synchronization
import Testing

/// A fill racing `then` on another thread: whichever wins, every handler runs exactly once,
/// with the value, on its queue. Each race is run many times, the two sides released together.
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

    /// Counts how often the attaching side found the future filled already, and how often not:
    /// the races are only worth something if both happen.
    private final class Outcomes: Sendable {
        let filledFirst = Atomic<Int>(0)
        let attachedFirst = Atomic<Int>(0)

        func record(filled: Bool) {
            if filled {
                filledFirst.wrappingAdd(1, ordering: .relaxed)
            } else {
                attachedFirst.wrappingAdd(1, ordering: .relaxed)
            }
        }
    }

    @Test func aDeferredFilledWhileAnotherThreadAttachesHandlersRunsEachOnce() async {
        let names = ["race-a", "race-b", "race-a"]
        let queues = names.map { namedQueue($0) }
        let reports = EventCollector<Report>()
        let outcomes = Outcomes()
        for round in 0..<Self.rounds {
            let deferred = Deferred<Int>()
            await race(round) {
                outcomes.record(filled: deferred.isFilled)
                for (handler, queue) in queues.enumerated() {
                    deferred.then(upon: queue) { value in
                        reports.record(Report(
                            round: round, handler: handler, queue: currentQueueName() ?? "?", value: value
                        ))
                    }
                }
            } fill: {
                deferred.fill(value: round)
            }
        }
        let all = await reports.values(count: Self.rounds * names.count)
        #expect(all.count == Set(all).count)
        #expect(Set(all) == Self.expected(queues: names))
        #expect(outcomes.filledFirst.load(ordering: .relaxed) > 0)
        #expect(outcomes.attachedFirst.load(ordering: .relaxed) > 0)
    }

    @Test func aDeferredResultFilledWhileAnotherThreadAttachesHandlersRunsEachOnce() async {
        let names = ["result-race-a", "result-race-b"]
        let queues = names.map { namedQueue($0) }
        let reports = EventCollector<Report>()
        let outcomes = Outcomes()
        for round in 0..<Self.rounds {
            let deferred = DeferredResult<Int>()
            await race(round) {
                outcomes.record(filled: deferred.isFilled)
                for (handler, queue) in queues.enumerated() {
                    deferred.then(upon: queue) { result in
                        reports.record(Report(
                            round: round, handler: handler, queue: currentQueueName() ?? "?",
                            value: (try? result.get()) ?? -1
                        ))
                    }
                }
            } fill: {
                deferred.success(value: round)
            }
        }
        let all = await reports.values(count: Self.rounds * names.count)
        #expect(all.count == Set(all).count)
        #expect(Set(all) == Self.expected(queues: names))
        #expect(outcomes.filledFirst.load(ordering: .relaxed) > 0)
        #expect(outcomes.attachedFirst.load(ordering: .relaxed) > 0)
    }

    /// Many futures, their handlers attached from the first while another thread fills them
    /// from the last, so that the two cross. A quarter is attached before the race and a
    /// quarter filled before it, so both orders happen whatever the timing; the half between
    /// is raced. Handlers attached in time are dispatched by the filling thread (joining its
    /// blocks), the others by the attaching thread; each runs once, on its queue.
    @Test func fillsRacingAttachesOfManyFuturesLoseNoHandler() async {
        let queue = namedQueue("race-many")
        let reports = EventCollector<Report>()
        let deferreds = (0..<Self.rounds).map { _ in Deferred<Int>() }
        let quarter = Self.rounds / 4
        @Sendable func attach(_ round: Int) {
            deferreds[round].then(upon: queue) { value in
                reports.record(Report(round: round, handler: 0, queue: currentQueueName() ?? "?", value: value))
            }
        }
        for round in 0..<quarter { attach(round) }
        for round in (Self.rounds - quarter)..<Self.rounds { deferreds[round].fill(value: round) }
        await race(0) {
            for round in quarter..<Self.rounds { attach(round) }
        } fill: {
            for round in (0..<(Self.rounds - quarter)).reversed() { deferreds[round].fill(value: round) }
        }
        let all = await reports.values(count: Self.rounds)
        #expect(all.count == Set(all).count)
        #expect(Set(all) == Self.expected(queues: ["race-many"]))
    }

    /// Runs `attach` and `fill` on two Dispatch threads (not the cooperative pool), each
    /// waiting, for a bounded spin, until the other has arrived, so that they start together;
    /// the side started first alternates with `round`. Returns when both are done.
    private func race(
        _ round: Int,
        attach: @escaping @Sendable () -> Void,
        fill: @escaping @Sendable () -> Void
    ) async {
        let arrived = Arrivals()
        let sides = round.isMultiple(of: 2) ? [attach, fill] : [fill, attach]
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for side in sides {
                DispatchQueue.global().async(group: group) {
                    arrived.arriveAndWait()
                    side()
                }
            }
            group.notify(queue: .global()) { continuation.resume() }
        }
    }

    /// A two-party start line. The wait is bounded: when the pool has no second thread free,
    /// the side that arrived goes on alone (a race then, too, just a less even one).
    private final class Arrivals: Sendable {
        private let count = Atomic<Int>(0)

        func arriveAndWait() {
            count.wrappingAdd(1, ordering: .acquiringAndReleasing)
            var spins = 0
            while count.load(ordering: .acquiring) < 2, spins < 100_000 {
                spins += 1
            }
        }
    }
}
