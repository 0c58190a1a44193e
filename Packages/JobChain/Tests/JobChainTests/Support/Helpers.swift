import Dispatch
import Foundation
import JobChain
import AsyncPrimitivesTesting

/// Holds a command (or any thread) until the test opens it.
final class Gate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)

    func wait() {
        semaphore.wait()
    }

    func open(_ count: Int = 1) {
        for _ in 0..<count { semaphore.signal() }
    }
}

/// Runs blocking code on a fresh thread (not the test's cooperative pool) and awaits its result.
func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.start()
    }
}

/// Runs code on the main queue and awaits its result.
func onMainQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        DispatchQueue.main.async { continuation.resume(returning: body()) }
    }
}

/// Tells whether code runs on the main queue, independently of the library's own check.
enum MainQueue {
    private static let key: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    static var isCurrent: Bool {
        DispatchQueue.getSpecific(key: key) == true
    }

    /// Call once before commands run so the key is set on the main queue.
    static func prepare() {
        _ = key
    }
}

/// A value behind an `NSLock`: ThreadSanitizer sees its hand-offs (it does not see those of
/// `Synchronization.Mutex` when threads contend on Linux).
// Safe: `value` is only touched while `lock` is held.
final class Protected<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Detects two commands running at once.
final class OverlapDetector: Sendable {
    private let state = Protected((running: 0, overlaps: 0))

    func enter() {
        state.withLock { state in
            state.running += 1
            if state.running > 1 { state.overlaps += 1 }
        }
    }

    func leave() {
        state.withLock { $0.running -= 1 }
    }

    var overlaps: Int {
        state.withLock { $0.overlaps }
    }
}

/// A counter shared with commands.
final class Counter: Sendable {
    private let value = Protected(0)

    @discardableResult
    func increment() -> Int {
        value.withLock { value in
            value += 1
            return value
        }
    }

    var count: Int {
        value.withLock { $0 }
    }
}

struct TestError: Error, Equatable {
    let name: String
}

/// A job that records its lifecycle callbacks.
// Restated as Swift 6 asks of every subclass; safe: its one stored property is a Sendable `let`.
final class RecordingJob: Job, @unchecked Sendable {
    let callbacks: EventCollector<String>

    init(mode: Mode = .auto, clock: some Clock<Duration> = ContinuousClock(), callbacks: EventCollector<String> = EventCollector()) {
        self.callbacks = callbacks
        super.init(mode: mode, clock: clock)
    }

    override func willStart() { callbacks.record("willStart") }
    override func didStart() { callbacks.record("didStart") }
    override func didFinish() { callbacks.record("didFinish") }
    override func willPause() { callbacks.record("willPause") }
    override func didPause() { callbacks.record("didPause") }
    override func didInterrupt() { callbacks.record("didInterrupt") }
    override func willStop() { callbacks.record("willStop") }
    override func didStop() { callbacks.record("didStop") }
    override func willEject() { callbacks.record("willEject") }
}
