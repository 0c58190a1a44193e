import Dispatch
import Synchronization
import Testing


/// A thread-safe list that test callbacks append to.
final class EventLog<Element: Sendable>: Sendable {
    private let storage = Mutex<[Element]>([])

    func append(_ element: Element) {
        storage.withLock { $0.append(element) }
    }

    var values: [Element] {
        storage.withLock { $0 }
    }
}

private let queueNameKey = DispatchSpecificKey<String>()

/// A serial or concurrent queue that ``currentQueueName()`` recognises.
func namedQueue(_ name: String, concurrent: Bool = false) -> DispatchQueue {
    let queue = DispatchQueue(label: name, attributes: concurrent ? [.concurrent] : [])
    queue.setSpecific(key: queueNameKey, value: name)
    return queue
}

/// Makes ``currentQueueName()`` return `"main"` on the main queue.
func nameMainQueue() {
    DispatchQueue.main.setSpecific(key: queueNameKey, value: "main")
}

/// The name of the ``namedQueue(_:concurrent:)`` running the caller, if any.
func currentQueueName() -> String? {
    DispatchQueue.getSpecific(key: queueNameKey)
}

/// An object whose lifetime a test watches through a weak reference.
final class Tracked: Sendable {
    let name: String

    init(_ name: String) {
        self.name = name
    }
}

/// A weak reference that is safe to read from any thread.
final class WeakBox<Object: AnyObject & Sendable>: Sendable {
    private let storage: Mutex<Weak>

    private struct Weak: ~Copyable {
        weak var object: Object?
    }

    init(_ object: Object) {
        storage = Mutex(Weak(object: object))
    }

    var object: Object? {
        storage.withLock { $0.object }
    }
}

/// Tells `onDeinit` when it goes away: a test awaits its release instead of polling.
final class DeinitProbe: Sendable {
    private let onDeinit: @Sendable () -> Void

    init(onDeinit: @escaping @Sendable () -> Void) {
        self.onDeinit = onDeinit
    }

    deinit {
        onDeinit()
    }
}

/// Checks that `weak`'s object is gone once every block already queued on the serial `queue`
/// has returned (and so dropped the handlers it ran).
func expectReleased<Object: AnyObject & Sendable>(
    _ weak: WeakBox<Object>,
    after queue: DispatchQueue,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        queue.async { continuation.resume() }
    }
    #expect(weak.object == nil, sourceLocation: sourceLocation)
}

// A test past its time limit is cancelled, but a `Task` it made is not: awaiting that task's
// `value` then never ends (a sleeper whose deadline the cancelled test no longer advances to),
// the time limit cannot end the test, and the test process never exits. These cancel the task
// when the awaiting test is cancelled.
extension Task where Failure == Never {
    /// `value`, cancelling the task when the caller is cancelled.
    var valueOrCancel: Success {
        get async { await withTaskCancellationHandler { await value } onCancel: { cancel() } }
    }
}

extension Task where Failure == any Error {
    /// `value`, cancelling the task when the caller is cancelled.
    var valueOrCancel: Success {
        get async throws { try await withTaskCancellationHandler { try await value } onCancel: { cancel() } }
    }
}
