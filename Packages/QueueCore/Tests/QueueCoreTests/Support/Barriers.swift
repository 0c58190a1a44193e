import Dispatch
import QueueCore
import QueueCoreTesting
import Synchronization

/// A persister whose `delete` blocks its thread, as an `fsync` or a group-commit wait does,
/// until `expected` deletes are blocked in it at once. It gives up after `patience` so that a
/// test of code that can never get there fails instead of hanging.
final class BarrierPersister: JobPersister, Sendable {
    private let expected: Int
    private let patience: DispatchTimeInterval
    private let arrived = Mutex(0)
    private let gate = DispatchSemaphore(value: 0)
    private let gaveUp = Atomic(0)

    init(expected: Int, patience: DispatchTimeInterval = .seconds(3)) {
        self.expected = expected
        self.patience = patience
    }

    /// How many deletes gave up waiting for the others.
    var timeouts: Int { gaveUp.load(ordering: .relaxed) }

    func persist(_ jobs: [CuteJob]) throws {}

    func delete(_ job: CuteJob) throws {
        let count = arrived.withLock { arrived -> Int in
            arrived += 1
            return arrived
        }
        if count == expected {
            for _ in 1..<expected { gate.signal() }
        } else if count < expected, gate.wait(timeout: .now() + patience) == .timedOut {
            gaveUp.add(1, ordering: .relaxed)
        }
    }

    func load() throws -> [CuteJob] { [] }

    func clear(completion: (@Sendable ((any Error)?) -> Void)?) { completion?(nil) }
}

/// Resumes every waiter once `count` tasks have arrived; never blocks a thread.
final class AsyncBarrier: Sendable {
    private let count: Int
    private let waiting = Mutex<(arrived: Int, continuations: [CheckedContinuation<Void, Never>])>((0, []))

    init(count: Int) {
        self.count = count
    }

    func arrive() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let release = waiting.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.arrived += 1
                state.continuations.append(continuation)
                guard state.arrived >= count else { return [] }
                defer { state.continuations = [] }
                return state.continuations
            }
            release.forEach { $0.resume() }
        }
    }
}
