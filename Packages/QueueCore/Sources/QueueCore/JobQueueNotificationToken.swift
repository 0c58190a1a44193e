public import Synchronization

/// Keeps one observer of a ``JobQueue`` registered; release it (or call ``invalidate()``) and
/// the observer hears nothing more.
///
/// ```swift
/// let token = queue.observe { queue, jobs, event in print(event, jobs) }
/// // … later
/// token.invalidate()   // or let the token go
/// ```
public final class JobQueueNotificationToken<Job: QueueJob>: Sendable {
    private let observer: JobQueueObserver<Job>
    private let unregister: @Sendable () -> Void

    init(observer: JobQueueObserver<Job>, unregister: @escaping @Sendable () -> Void) {
        self.observer = observer
        self.unregister = unregister
    }

    deinit {
        invalidate()
    }

    /// Stops delivery to this observer: no event that has not reached it yet will.
    public func invalidate() {
        if observer.active.exchange(false, ordering: .acquiringAndReleasing) {
            unregister()
        }
    }
}

/// One registered observer: its block and whether its token is still alive.
@usableFromInline
final class JobQueueObserver<Job: QueueJob>: Sendable {
    @usableFromInline let block: @Sendable (JobQueue<Job>, [Job], JobQueueEvent) -> Void
    /// Called when the queue is deinitialized (ends an `events` stream).
    @usableFromInline let queueDidEnd: (@Sendable () -> Void)?
    @usableFromInline let active = Atomic<Bool>(true)

    init(
        block: @escaping @Sendable (JobQueue<Job>, [Job], JobQueueEvent) -> Void,
        queueDidEnd: (@Sendable () -> Void)?
    ) {
        self.block = block
        self.queueDidEnd = queueDidEnd
    }
}
