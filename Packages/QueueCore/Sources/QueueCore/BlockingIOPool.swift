import DequeModule
import Dispatch
import Foundation
import Synchronization

/// Threads of its own for blocking persister calls (an `fsync`, a group-commit wait), so that
/// they never occupy a thread of Swift's cooperative pool, which has only as many threads as
/// the machine has cores.
///
/// Like swift-nio's `NIOThreadPool.singleton`: one pool for the process, started lazily. A
/// thread is started when work arrives and no thread is idle, up to ``maximumThreads``; past
/// that, work waits in order for the next free thread. Idle threads block on a semaphore (they
/// are our own threads, not the pool's) and live as long as the process, so nothing is left
/// running that an owner would have to cancel: the pool only ever runs work handed to it.
final class BlockingIOPool: Sendable {
    /// The pool every queue of the process shares.
    static let shared = BlockingIOPool(maximumThreads: 64)

    private struct State {
        var work: Deque<@Sendable () -> Void> = []
        var threads = 0
        /// Threads waiting on `wakeUp` that no submitter has claimed yet.
        var idle = 0
    }

    private enum Start { case none, signal, spawn }

    /// The most threads the pool starts.
    let maximumThreads: Int
    private let state = Mutex(State())
    private let wakeUp = DispatchSemaphore(value: 0)

    init(maximumThreads: Int) {
        self.maximumThreads = max(1, maximumThreads)
    }

    /// How many threads the pool has started so far.
    var threadCount: Int {
        state.withLock { $0.threads }
    }

    /// Runs `work` on one of the pool's threads, soon; never on the caller's thread.
    func submit(_ work: @escaping @Sendable () -> Void) {
        let start = state.withLock { state -> Start in
            state.work.append(work)
            if state.idle > 0 {
                state.idle -= 1
                return .signal
            }
            guard state.threads < maximumThreads else { return .none }
            state.threads += 1
            return .spawn
        }
        switch start {
        case .none:
            break // A busy thread takes it when it is done: it looks for work before it idles.
        case .signal:
            wakeUp.signal()
        case .spawn:
            let thread = Thread { [self] in runLoop() }
            thread.name = "QueueKit.BlockingIO"
            thread.start()
        }
    }

    /// Runs `work` on the pool and returns its result to the awaiting task, whose thread is
    /// free meanwhile.
    func run<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
            submit {
                continuation.resume(with: Result { try work() })
            }
        }
    }

    private func runLoop() {
        while true {
            let next = state.withLock { state -> (@Sendable () -> Void)? in
                if let work = state.work.popFirst() { return work }
                state.idle += 1
                return nil
            }
            if let next {
                next()
            } else {
                wakeUp.wait()
            }
        }
    }

    /// Whether the caller runs inside a Swift task, and so, on Swift's default executors, on a
    /// thread of the cooperative pool that must not block.
    static var callerIsInATask: Bool {
        withUnsafeCurrentTask { $0 != nil }
    }
}
