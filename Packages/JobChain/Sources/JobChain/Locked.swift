import Foundation

/// A value guarded by a lock: the `Mutex` pattern, on a lock that ThreadSanitizer understands.
///
/// `Synchronization.Mutex` on Linux parks contended threads with a raw `futex` inside the
/// uninstrumented standard library, so `swift test --sanitize=thread` reports false races on
/// the state it guards whenever two threads contend. `NSLock` is a `pthread_mutex_t`, which
/// ThreadSanitizer intercepts, so it sees every hand-off. The rule is the same as with
/// `Mutex`: decide inside ``withLock(_:)``, run user code after leaving it.
// Safe: `value` is only read or written inside `withLock`, while `lock` is held, so no two
// threads touch it at once and every hand-off goes through the lock's acquire/release.
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
