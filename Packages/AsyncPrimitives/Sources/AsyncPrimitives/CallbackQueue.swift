public import Dispatch
import Synchronization

/// The queue that `upon:` parameters use when a call site does not name one.
///
/// As in SPRingboard Core, handlers run on `DispatchQueue.main` unless a call names another
/// queue. That suits apps. A server, a command-line tool or a test process can set one
/// process-wide default instead, once, before it creates futures:
///
/// ```swift
/// CallbackQueue.default = DispatchQueue(label: "com.example.callbacks")
/// ```
///
/// The value is read when a call that omits `upon:` is made, so changing it affects handlers
/// attached afterwards, never handlers already attached.
public enum CallbackQueue: Sendable {
    private static let storage = Mutex<DispatchQueue>(.main)

    /// The queue that every `upon:` parameter defaults to. Initially `DispatchQueue.main`.
    ///
    /// Reading and writing are thread safe. `DispatchQueue.main` runs its blocks only while
    /// the main thread serves it: in an app, in an async `main` program (the main actor runs
    /// on the main queue), after `dispatchMain()`, or inside `RunLoop.main.run()`. A program
    /// whose main thread blocks in synchronous code should set another queue here.
    public static var `default`: DispatchQueue {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
