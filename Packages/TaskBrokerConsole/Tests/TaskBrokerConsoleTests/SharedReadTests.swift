import Synchronization
@testable import TaskBrokerConsole
import Testing

/// The live counts' shared read: streams woken by one change read the database once.
@Suite struct SharedReadTests {
    /// Counts its reads; each read returns its number and, when gated, waits to be let go.
    final class Reads: Sendable {
        let count = Atomic<Int>(0)
        let started: AsyncStream<Int>
        private let startedContinuation: AsyncStream<Int>.Continuation
        /// Whether reads were let go, and the reads waiting until they are.
        private let gate = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
        let gated: Bool
        let failing = Atomic<Bool>(false)

        init(gated: Bool) {
            self.gated = gated
            (started, startedContinuation) = AsyncStream.makeStream()
        }

        func read() async throws -> Int {
            let number = count.add(1, ordering: .relaxed).newValue
            startedContinuation.yield(number)
            if gated {
                await withCheckedContinuation { waiter in
                    let open = gate.withLock { gate in
                        if !gate.open { gate.waiters.append(waiter) }
                        return gate.open
                    }
                    if open { waiter.resume() }
                }
            }
            if failing.load(ordering: .relaxed) { throw ReadFailed() }
            return number
        }

        /// Lets every read go, those waiting and those to come.
        func release() {
            let waiters = gate.withLock { gate in
                gate.open = true
                defer { gate.waiters = [] }
                return gate.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    struct ReadFailed: Error {}

    @Test func callersWokenBeforeAReadStartedShareIt() async throws {
        let reads = Reads(gated: false)
        let shared = SharedRead { try await reads.read() }
        let woken = ContinuousClock.now
        #expect(try await shared.value(notOlderThan: woken) == 1)
        for _ in 0..<5 {
            #expect(try await shared.value(notOlderThan: woken) == 1, "a read that started after the wake answers")
        }
        #expect(reads.count.load(ordering: .relaxed) == 1)
        #expect(try await shared.value(notOlderThan: .now) == 2, "woken after it: a new read")
    }

    @Test func aCallerJoinsTheReadUnderWay() async throws {
        let reads = Reads(gated: true)
        let shared = SharedRead { try await reads.read() }
        let woken = ContinuousClock.now
        async let first = shared.value(notOlderThan: woken)
        var started = reads.started.makeAsyncIterator()
        #expect(await started.next() == 1)
        // The read is under way (and waits): a second stream woken before it began joins it.
        async let second = shared.value(notOlderThan: woken)
        reads.release()
        #expect(try await first == 1)
        #expect(try await second == 1)
        #expect(reads.count.load(ordering: .relaxed) == 1, "one read for both")
    }

    @Test func aFailedReadIsNotKept() async throws {
        let reads = Reads(gated: false)
        let shared = SharedRead { try await reads.read() }
        let woken = ContinuousClock.now
        reads.failing.store(true, ordering: .relaxed)
        await #expect(throws: ReadFailed.self) { try await shared.value(notOlderThan: woken) }
        reads.failing.store(false, ordering: .relaxed)
        #expect(try await shared.value(notOlderThan: woken) == 2, "the next caller reads again")
    }
}
