public import Dispatch

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

    /// Dispatches one block that runs `job`, then every job appended while it drains.
    @usableFromInline
    static func dispatch(_ job: @escaping Job, on queue: DispatchQueue) {
        queue.async { run(on: queue, first: job) }
    }

    /// Dispatches one block that runs `jobs` in order on `queue`.
    @usableFromInline
    static func dispatch(_ jobs: [Job], on queue: DispatchQueue) {
        queue.async { run(on: queue, jobs: jobs) }
    }

    /// Runs `first` and then every job appended while draining, on the current thread, which
    /// is serving `queue`.
    static func run(on queue: DispatchQueue, first: Job) {
        let context = DrainContext(queue: queue)
        let previous = pthread_getspecific(slot)
        pthread_setspecific(slot, Unmanaged.passUnretained(context).toOpaque())
        first()
        while let job = context.next() {
            job()
        }
        pthread_setspecific(slot, previous)
        withExtendedLifetime(context) {}
    }

    /// Runs `jobs` in order, then every job appended while draining.
    static func run(on queue: DispatchQueue, jobs: [Job]) {
        run(on: queue) {
            for job in jobs { job() }
        }
    }

    private static let slot: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}

/// Not `Sendable`: a drain context belongs to the one thread that runs its block.
@available(*, unavailable)
extension DrainContext: Sendable {}
