public import Dispatch

import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One piece of work for a callback queue.
@usableFromInline
typealias Job = @Sendable () -> Void

/// A handler attached to a future: where it runs and what it does with the value.
///
/// A `nil` queue marks an internal observer (forwarding into another future, resuming a
/// continuation). Those run right after the fill, outside any lock, on the filling thread;
/// they never run user code.
@usableFromInline
struct Callback<Value: Sendable>: Sendable {
    @usableFromInline let queue: DispatchQueue?
    @usableFromInline let body: @Sendable (Value) -> Void

    @inlinable
    init(queue: DispatchQueue?, body: @escaping @Sendable (Value) -> Void) {
        self.queue = queue
        self.body = body
    }
}

/// The handlers of a future and, once filled, its value.
///
/// The first handler is stored inline: most futures in a chain have exactly one.
@usableFromInline
struct CallbackState<Value: Sendable>: ~Copyable, Sendable {
    @usableFromInline var value: Value?
    @usableFromInline var first: Callback<Value>?
    @usableFromInline var rest: [Callback<Value>]

    @inlinable
    init(value: Value? = nil) {
        self.value = value
        self.first = nil
        self.rest = []
    }

    /// Stores `callback` unless the future is filled.
    ///
    /// - Returns: The value when the future is already filled; the caller runs `callback`.
    @inlinable
    mutating func add(_ callback: Callback<Value>) -> Value? {
        if let value { return value }
        if first == nil {
            first = callback
        } else {
            rest.append(callback)
        }
        return nil
    }

    /// Fills the future unless it is filled already, and hands back the handlers to run.
    ///
    /// The future keeps no reference to its handlers afterwards, so a handler that captures
    /// the future does not form a cycle once the future is filled.
    @inlinable
    mutating func fill(_ newValue: Value) -> Callbacks<Value>? {
        if value != nil { return nil }
        value = newValue
        let callbacks = Callbacks(first: first, rest: rest)
        first = nil
        rest = []
        return callbacks
    }
}

/// The handlers taken from a future at its fill.
@usableFromInline
struct Callbacks<Value: Sendable>: Sendable {
    @usableFromInline let first: Callback<Value>?
    @usableFromInline let rest: [Callback<Value>]

    @inlinable
    init(first: Callback<Value>?, rest: [Callback<Value>]) {
        self.first = first
        self.rest = rest
    }

    /// Runs every handler with `value`: internal observers at once, user handlers
    /// asynchronously on their queues, in the order they were added.
    @inlinable
    func run(with value: Value) {
        guard let first else { return }
        if rest.isEmpty {
            Scheduler.schedule(first, with: value)
            return
        }
        Scheduler.schedule([first] + rest, with: value)
    }
}

/// Runs callbacks on their queues without one dispatch per link where it can.
///
/// Handlers bound for one queue that become ready while a block of ours for that queue is
/// already dispatched (many futures filled from another thread, say) join that block's batch
/// instead of dispatching one block each; the batch runs them in the order they became ready.
///
/// Each block this type dispatches drains a small job list and publishes it in a thread-local
/// slot for as long as it runs. A future filled by a handler that is running on queue `Q`
/// (a `pipe` link, or user code inside a handler) puts its own handlers for `Q` on that list
/// instead of dispatching them again. They still run after the current handler returns, never
/// inside `fill` or `then`, and on the queue they asked for; a chain of any length runs as a
/// loop, not as nested calls, so it cannot overflow the stack.
@usableFromInline
enum Scheduler: Sendable {
    /// Schedules one callback.
    @inlinable
    static func schedule<Value>(_ callback: Callback<Value>, with value: Value) {
        guard let queue = callback.queue else {
            callback.body(value)
            return
        }
        let body = callback.body
        let job: Job = { body(value) }
        if let drain = DrainContext.current, drain.queue === queue {
            drain.append(job)
        } else {
            DrainContext.dispatch(job, on: queue)
        }
    }

    /// Schedules several callbacks of one future, keeping their order: consecutive handlers
    /// for the same queue share one dispatched block, so they run in order even on a
    /// concurrent queue.
    @inlinable
    static func schedule<Value>(_ callbacks: [Callback<Value>], with value: Value) {
        let drain = DrainContext.current
        var group: [Job] = []
        var groupQueue: DispatchQueue?
        func flush() {
            guard let queue = groupQueue, !group.isEmpty else { return }
            let jobs = group
            DrainContext.dispatch(jobs, on: queue)
            group = []
        }
        for callback in callbacks {
            guard let queue = callback.queue else {
                callback.body(value)
                continue
            }
            let body = callback.body
            let job: Job = { body(value) }
            if let drain, drain.queue === queue {
                drain.append(job)
                continue
            }
            if groupQueue !== queue {
                flush()
                groupQueue = queue
            }
            group.append(job)
        }
        flush()
    }
}

/// The job list of one dispatched block, reachable from the thread that runs it.
///
/// Only the thread running the block touches it (it is found through a thread-local slot that
/// the block sets on entry and restores on exit), so it needs no lock.
@usableFromInline
final class DrainContext {
    @usableFromInline let queue: DispatchQueue
    private var jobs: [Job] = []
    private var head = 0

    private init(queue: DispatchQueue) {
        self.queue = queue
    }

    @usableFromInline
    func append(_ job: @escaping Job) {
        jobs.append(job)
    }

    private func next() -> Job? {
        guard head < jobs.count else { return nil }
        let job = jobs[head]
        head += 1
        if head == jobs.count {
            jobs.removeAll(keepingCapacity: true)
            head = 0
        }
        return job
    }

    /// The block running on this thread, if it is one of ours.
    @usableFromInline
    static var current: DrainContext? {
        guard let pointer = pthread_getspecific(slot) else { return nil }
        return Unmanaged<DrainContext>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Schedules `job` on `queue` from outside a block of ours on that queue: it joins the
    /// queue's pending batch, and only the first job of a batch dispatches a block.
    @usableFromInline
    static func dispatch(_ job: @escaping Job, on queue: DispatchQueue) {
        if PendingBatches.shared.add(job, for: queue) {
            queue.async { drainBatches(of: queue) }
        }
    }

    /// Schedules `jobs`, in order, on `queue`, joining its pending batch like one job does.
    @usableFromInline
    static func dispatch(_ jobs: [Job], on queue: DispatchQueue) {
        if PendingBatches.shared.add(contentsOf: jobs, for: queue) {
            queue.async { drainBatches(of: queue) }
        }
    }

    /// The block a batch dispatches: runs the jobs pending for `queue` in order, each
    /// followed by the jobs it scheduled on `queue` itself; then, if more became pending
    /// meanwhile, dispatches one more block for them (so other work on `queue` is not starved).
    static func drainBatches(of queue: DispatchQueue) {
        let jobs = PendingBatches.shared.take(for: queue)
        let context = DrainContext(queue: queue)
        let previous = pthread_getspecific(slot)
        pthread_setspecific(slot, Unmanaged.passUnretained(context).toOpaque())
        for job in jobs {
            job()
            while let nested = context.next() {
                nested()
            }
        }
        pthread_setspecific(slot, previous)
        withExtendedLifetime(context) {}
        if PendingBatches.shared.finish(for: queue) {
            queue.async { drainBatches(of: queue) }
        }
    }

    private static let slot: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}

/// The jobs waiting for a block of ours on each queue.
///
/// A queue has an entry from the moment a job is scheduled on it from outside until a block
/// has run every job and found none new; while it has one, one block for it is dispatched or
/// running (that block retains the queue, so its identifier cannot be reused meanwhile).
final class PendingBatches: Sendable {
    static let shared = PendingBatches()

    /// One entry per queue with a block dispatched or running: a handful at most, so a linear
    /// search beats hashing.
    private let batches = Mutex<[(queue: ObjectIdentifier, jobs: [Job])]>([])

    /// Appends `job` to `queue`'s batch; `true` when the caller must dispatch the block.
    func add(_ job: @escaping Job, for queue: DispatchQueue) -> Bool {
        let key = ObjectIdentifier(queue)
        return batches.withLock { batches -> Bool in
            for index in batches.indices where batches[index].queue == key {
                batches[index].jobs.append(job)
                return false
            }
            batches.append((key, [job]))
            return true
        }
    }

    /// Appends `jobs` to `queue`'s batch; `true` when the caller must dispatch the block.
    func add(contentsOf jobs: [Job], for queue: DispatchQueue) -> Bool {
        let key = ObjectIdentifier(queue)
        return batches.withLock { batches -> Bool in
            for index in batches.indices where batches[index].queue == key {
                batches[index].jobs.append(contentsOf: jobs)
                return false
            }
            batches.append((key, jobs))
            return true
        }
    }

    /// Takes the jobs pending for `queue`, leaving its entry (a block is running).
    func take(for queue: DispatchQueue) -> [Job] {
        let key = ObjectIdentifier(queue)
        return batches.withLock { batches -> [Job] in
            for index in batches.indices where batches[index].queue == key {
                var jobs: [Job] = []
                swap(&jobs, &batches[index].jobs)
                return jobs
            }
            return []
        }
    }

    /// Ends a block: removes `queue`'s entry when nothing new is pending; `true` when
    /// something is and the caller must dispatch one more block.
    func finish(for queue: DispatchQueue) -> Bool {
        let key = ObjectIdentifier(queue)
        return batches.withLock { batches -> Bool in
            for index in batches.indices where batches[index].queue == key {
                if batches[index].jobs.isEmpty {
                    batches.remove(at: index)
                    return false
                }
                return true
            }
            return false
        }
    }
}

/// Not `Sendable`: a drain context belongs to the one thread that runs its block.
@available(*, unavailable)
extension DrainContext: Sendable {}
