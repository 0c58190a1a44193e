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
    /// The number of the first event this observer hears (set when it is registered, under
    /// the queue's lock; read on the queue's executor after that lock has been taken again).
    @usableFromInline let firstEvent = Atomic<UInt64>(UInt64.max)

    init(
        block: @escaping @Sendable (JobQueue<Job>, [Job], JobQueueEvent) -> Void,
        queueDidEnd: (@Sendable () -> Void)?
    ) {
        self.block = block
        self.queueDidEnd = queueDidEnd
    }
}

/// The observers of one ``JobQueue``, shared by the queue and the tokens of its observers.
@usableFromInline
final class JobQueueObservers<Job: QueueJob>: Sendable {
    private struct State {
        var nextID: UInt64 = 0
        var entries: [(id: UInt64, observer: JobQueueObserver<Job>)] = []
        /// `entries`' observers, rebuilt on every change so that a delivery makes no array.
        var snapshot: [JobQueueObserver<Job>] = []
    }

    private let state = Mutex(State())
    /// How many observers are registered (inlinable: read up to three times per job).
    @usableFromInline let count = Atomic<Int>(0)

    @usableFromInline init() {}

    /// Whether no observer is registered; read under the queue's lock when an event happens.
    @inlinable var isEmpty: Bool {
        count.load(ordering: .acquiring) == 0
    }

    /// The registered observers, in the order they were added.
    @usableFromInline var snapshot: [JobQueueObserver<Job>] {
        state.withLock { $0.snapshot }
    }

    func add(_ observer: JobQueueObserver<Job>) -> UInt64 {
        state.withLock { state -> UInt64 in
            state.nextID += 1
            state.entries.append((state.nextID, observer))
            state.snapshot = state.entries.map(\.observer)
            count.store(state.entries.count, ordering: .releasing)
            return state.nextID
        }
    }

    func remove(id: UInt64) {
        state.withLock { state in
            state.entries.removeAll { $0.id == id }
            state.snapshot = state.entries.map(\.observer)
            count.store(state.entries.count, ordering: .releasing)
        }
    }
}
