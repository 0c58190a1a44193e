import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One piece of work for a callback queue.
typealias Job = @Sendable () -> Void

/// A handler attached to a future: where it runs and what it does with the value.
///
/// A `nil` queue marks an internal observer (forwarding into another future, resuming a
/// continuation). Those run right after the fill, outside any lock, on the filling thread;
/// they never run user code.
struct Callback<Value: Sendable>: Sendable {
    let queue: DispatchQueue?
    let body: @Sendable (Value) -> Void
}

/// The handlers of a future and, once filled, its value.
///
/// The first handler is stored inline: most futures in a chain have exactly one.
struct CallbackState<Value: Sendable>: ~Copyable {
    private(set) var value: Value?
    private var first: Callback<Value>?
    private var rest: [Callback<Value>] = []

    init(value: Value? = nil) {
        self.value = value
    }

    /// Stores `callback` unless the future is filled.
    ///
    /// - Returns: The value when the future is already filled; the caller runs `callback`.
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
struct Callbacks<Value: Sendable> {
    let first: Callback<Value>?
    let rest: [Callback<Value>]

    /// Runs every handler with `value`: internal observers at once, user handlers
    /// asynchronously on their queues, in the order they were added.
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
enum Scheduler {
    /// Schedules one callback.
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
            queue.async { DrainContext.run(on: queue, first: job) }
        }
    }

    /// Schedules several callbacks of one future, keeping their order: consecutive handlers
    /// for the same queue share one dispatched block, so they run in order even on a
    /// concurrent queue.
    static func schedule<Value>(_ callbacks: [Callback<Value>], with value: Value) {
        let drain = DrainContext.current
        var group: [Job] = []
        var groupQueue: DispatchQueue?
        func flush() {
            guard let queue = groupQueue, !group.isEmpty else { return }
            let jobs = group
            queue.async { DrainContext.run(on: queue, jobs: jobs) }
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
final class DrainContext {
    let queue: DispatchQueue
    private var jobs: [Job] = []
    private var head = 0

    private init(queue: DispatchQueue) {
        self.queue = queue
    }

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
    static var current: DrainContext? {
        guard let pointer = pthread_getspecific(slot) else { return nil }
        return Unmanaged<DrainContext>.fromOpaque(pointer).takeUnretainedValue()
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
