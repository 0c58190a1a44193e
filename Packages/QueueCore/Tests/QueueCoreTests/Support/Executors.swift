import AsyncPrimitivesTesting
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import QueueCore
import QueueCoreTesting
import Synchronization

/// libdispatch's `dispatch_queue_get_label`, which the Swift overlay hides behind
/// `DispatchQueue.label` (a property of a queue one already holds, not of the current one).
private let getLabel: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>? = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "dispatch_queue_get_label") else {
        return { _ in nil }
    }
    return unsafeBitCast(symbol, to: (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self)
}()

/// The label of the dispatch queue running the caller (`nil` asks for the current queue).
func currentDispatchQueueLabel() -> String {
    getLabel(nil).map { String(cString: $0) } ?? "?"
}

/// The label of the executor of the queue named `name`: observers must run there.
func executorLabel(ofQueueNamed name: String) -> String {
    "QueueKit.JobQueue.\(name)"
}

/// Notes whether two observer calls ever overlapped (they must run one at a time).
final class OverlapDetector: Sendable {
    private let inside = Atomic(false)
    private let overlapped = Atomic(false)

    /// Runs `body`, noting an overlap if another `run` is inside at the same time.
    func run(_ body: () -> Void) {
        if inside.exchange(true, ordering: .acquiringAndReleasing) {
            overlapped.store(true, ordering: .relaxed)
        }
        body()
        inside.store(false, ordering: .releasing)
    }

    /// Whether two calls overlapped.
    var sawOverlap: Bool { overlapped.load(ordering: .relaxed) }
}

/// Fails the jobs whose action is in `failing` once each and completes the others; from
/// another thread when `offThread`, so that events come from outside the pump too, else at
/// once, inside the pump's loop.
final class FailingOnceProcessor: JobProcessor, Sendable {
    private let failing: Mutex<Set<String>>
    private let offThread: Bool
    private let worker = DispatchQueue(label: "QueueCoreTests.off-thread")

    init(failing: Set<String>, offThread: Bool) {
        self.failing = Mutex(failing)
        self.offThread = offThread
    }

    func processJob(_ job: CuteJob, completion: @escaping @Sendable (CuteJob, (any Error)?) -> Void) {
        let fails = failing.withLock { $0.remove(job.action) != nil }
        if offThread {
            worker.async { completion(job, fails ? TestFailure() : nil) }
        } else {
            completion(job, fails ? TestFailure() : nil)
        }
    }
}

/// Puts a failed job back at the front of its queue, once per job.
struct RetryOnceStrategy: JobRetryStrategy {
    func retry<JobType: QueueJob>(job: JobType, failedOnQueue queue: JobQueue<JobType>) {
        queue.retry(job)
    }
}

/// A gate an observer waits at, on the queue's executor, until the test opens it; the test
/// awaits ``waitUntilHeld()`` first, so it knows the executor is busy in that observer.
final class ExecutorGate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let held = EventCollector<Bool>()

    /// Called by the observer: tells the test it is here, then waits for ``open()`` (at most
    /// 30 s, a hang guard for a test that fails before it opens the gate).
    func hold() {
        held.record(true)
        _ = semaphore.wait(timeout: .now() + 30)
    }

    /// Returns once an observer is held at the gate.
    func waitUntilHeld() async {
        _ = await held.values(count: 1)
    }

    /// Lets the held observer go on.
    func open() {
        semaphore.signal()
    }
}
