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

/// A filled future whose one handler is kept pending in it, on a block's job list: the block
/// runs that handler in its turn, through `run`, without allocating a job for it. Either the
/// future was filled inside a block running on that handler's queue, or it was filled
/// elsewhere and joined (or started) a block for that queue as a job would.
///
/// `run` is a non-capturing function, specialised for the future's type where the future was
/// filled; it takes the handler and the value from `future` and runs the handler.
@usableFromInline
struct ReadyFuture: Sendable {
    @usableFromInline let future: any AnyObject & Sendable
    @usableFromInline let run: @Sendable (any AnyObject & Sendable) -> Void

    @inlinable
    init(future: any AnyObject & Sendable, run: @escaping @Sendable (any AnyObject & Sendable) -> Void) {
        self.future = future
        self.run = run
    }
}

/// What ``CallbackState/fill(_:drain:)`` leaves the filling thread to do.
@usableFromInline
enum FillOutcome<Value: Sendable>: Sendable {
    /// The future was filled already; nothing changed.
    case alreadyFilled
    /// Run these handlers, taken from the future, with the value.
    case run(Callbacks<Value>)
    /// The future kept its one handler as pending: append the future to the running block
    /// (``DrainContext/appendReady(_:)``), which takes the handler when its turn comes.
    case appendToDrain
    /// The future kept its one handler, bound for this queue, as pending: dispatch the future
    /// on it (``DrainContext/dispatch(_:on:)-(ReadyFuture,_)``) as a job would be, without
    /// allocating the job.
    case dispatchPending(DispatchQueue)
}

/// The handlers of a future and, once filled, its value.
///
/// The first handler is stored inline: most futures in a chain have exactly one. After a fill
/// that returned ``FillOutcome/appendToDrain``, `first` holds that handler until the running
/// block takes it with ``takePending()``; handlers added after the fill are never stored.
///
/// The value is kept in a ``ValueSlot``, so no stored property's layout depends on `Value`:
/// destroying the state in the future's unspecialised `deinit` looks up no generic metadata.
/// The owner's `deinit` destroys the value.
@usableFromInline
struct CallbackState<Value: Sendable>: ~Copyable, Sendable {
    @usableFromInline var slot: ValueSlot<Value>
    @usableFromInline var first: Callback<Value>?
    @usableFromInline var rest: [Callback<Value>]

    @inlinable
    init() {
        self.slot = ValueSlot()
        self.first = nil
        self.rest = []
    }

    @inlinable
    init(value: Value) {
        self.init()
        slot.set(value)
    }

    /// The value, once filled.
    @inlinable
    var value: Value? {
        mutating get { slot.value }
    }

    /// Whether the future is filled.
    @inlinable
    var isFilled: Bool { slot.isSet }

    /// Moves `callback` into the state unless the future is filled.
    ///
    /// - Returns: The value when the future is already filled; `callback` is left in place
    ///   then, for the caller to run.
    @inlinable
    mutating func add(_ callback: inout Callback<Value>?) -> Value? {
        if let value { return value }
        if first == nil {
            first = callback.take()
        } else if let callback = callback.take() {
            rest.append(callback)
        }
        return nil
    }

    /// Fills the future unless it is filled already, and hands back the handlers to run.
    ///
    /// The future keeps no reference to its handlers afterwards, so a handler that captures
    /// the future does not form a cycle once the future is filled. When the future has
    /// exactly one handler, for a queue, the handler stays in `first` as pending and the caller
    /// appends the future to `drain` (the block running on this thread) if that accepts the
    /// queue, or dispatches it on the queue: the handler then runs as a job made for it would,
    /// without one.
    @inlinable
    mutating func fill(_ newValue: Value, drain: DrainContext?) -> FillOutcome<Value> {
        if slot.isSet { return .alreadyFilled }
        slot.set(newValue)
        if rest.isEmpty, let queue = first?.queue {
            if let drain, drain.accepts(queue) { return .appendToDrain }
            return .dispatchPending(queue)
        }
        let callbacks = Callbacks(first: first, rest: rest)
        first = nil
        rest = []
        return .run(callbacks)
    }

    /// The pending handler and the value, once; the future drops the handler.
    @inlinable
    mutating func takePending() -> (Callback<Value>, Value)? {
        guard let value, let callback = first.take() else { return nil }
        return (callback, value)
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
/// Handlers bound for one queue that become ready one after another on one thread (many
/// futures filled from another thread, say) join the block that thread dispatched last, as
/// long as that block has not finished, instead of dispatching one block each; the block runs
/// them in the order they became ready, taking on those that join while it runs. A handler
/// joins only the *last* block its thread dispatched, so no handler overtakes one that became ready before it on the same thread,
/// even when two `DispatchQueue` values name the same queue (on Linux every read of
/// `DispatchQueue.main` makes a new one).
///
/// Each block this type dispatches drains a small job list and publishes it in a thread-local
/// slot for as long as it runs. A future filled by a handler that is running on queue `Q`
/// (a `pipe` link, or user code inside a handler) puts its own handlers for `Q` on that list
/// instead of dispatching them again. They still run after the current handler returns, never
/// inside `fill` or `then`, and on the queue they asked for; a chain of any length runs as a
/// loop, not as nested calls, so it cannot overflow the stack. Once a handler of the block has
/// dispatched anything elsewhere, later handlers for `Q` are dispatched too (the other block
/// may be bound for the same queue under another `DispatchQueue` value, and must not be
/// overtaken).
///
/// Handlers that join one block run one after another, also on a concurrent queue: a handler
/// must not wait for another handler bound for the same queue.
@usableFromInline
enum Scheduler: Sendable {
    /// Schedules one callback.
    @inlinable
    static func schedule<Value>(_ callback: Callback<Value>, with value: Value) {
        guard let queue = callback.queue else {
            InlineLoop.run(callback.body, with: value)
            return
        }
        let body = callback.body
        let job: Job = { body(value) }
        let drain = DrainContext.current
        if let drain, drain.accepts(queue) {
            drain.append(job)
        } else {
            drain?.seal()
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
                InlineLoop.run(callback.body, with: value)
                continue
            }
            let body = callback.body
            let job: Job = { body(value) }
            if let drain, drain.accepts(queue) {
                drain.append(job)
                continue
            }
            drain?.seal()
            if groupQueue !== queue {
                flush()
                groupQueue = queue
            }
            group.append(job)
        }
        flush()
    }
}

/// One entry of a block's job list or of a batch: a job, or a future with a pending handler.
enum DrainItem: Sendable {
    case job(Job)
    case ready(ReadyFuture)

    // `consuming`: the job or the future moves out of the item instead of being copied
    // (a retain and a release each, per chain link).
    consuming func run() {
        switch consume self {
        case .job(let job): job()
        case .ready(let ready): ready.run(ready.future)
        }
    }
}

/// The job list of one dispatched block, reachable from the thread that runs it.
///
/// Only the thread running the block touches it (it is found through a thread-local slot that
/// the block sets on entry and restores on exit), so it needs no lock.
@usableFromInline
final class DrainContext {
    @usableFromInline let queue: DispatchQueue
    // No dynamic exclusivity checks on the list (they were ~3% of a chain link): only the
    // thread running the block touches it, and no access spans a call that could reach it
    // again (a job runs after it has been moved off the list).
    @exclusivity(unchecked) private var jobs: [DrainItem] = []
    @exclusivity(unchecked) private var head = 0
    /// The job appended while the list was empty (in a chain, every link's): it runs before
    /// any on `jobs`, which were all appended after it. Taken from an optional, it is moved
    /// out; taken from the array, it was copied (a retain and a release per chain link).
    @exclusivity(unchecked) private var single: DrainItem?
    /// Set once a job of this block has dispatched a block of its own: from then on, jobs for
    /// `queue` are dispatched too, so that none overtakes that block.
    private var sealed = false

    /// The batch this block runs, closed when the block is sealed.
    private let batch: Batch

    private init(queue: DispatchQueue, batch: Batch) {
        self.queue = queue
        self.batch = batch
    }

    /// Whether a job for `queue` may run in this block, after the current job.
    @usableFromInline
    func accepts(_ queue: DispatchQueue) -> Bool {
        !sealed && self.queue === queue
    }

    /// Makes every later job for this block's queue be dispatched instead of appended, and
    /// closes the block's batch: a job that becomes ready from now on, on any thread, must not
    /// join this block ahead of the block just dispatched.
    @usableFromInline
    func seal() {
        if sealed { return }
        sealed = true
        batch.close()
    }

    @usableFromInline
    func append(_ job: @escaping Job) {
        append(item: .job(job))
    }

    /// Appends a future whose one handler is pending (see ``FillOutcome/appendToDrain``):
    /// that handler runs after the jobs already on the list, as an appended job would.
    @usableFromInline
    func appendReady(_ ready: consuming ReadyFuture) {
        append(item: .ready(ready))
    }

    private func append(item: consuming DrainItem) {
        if single == nil, head == jobs.count {
            single = item
        } else {
            jobs.append(item)
        }
    }

    /// Runs the jobs on the list, in order, including those they append, until it is empty.
    private func runNested() {
        while true {
            if let item = single.take() {
                item.run()
                continue
            }
            guard head < jobs.count else { return }
            let item: DrainItem
            if head == jobs.count - 1 {
                // The last item (in a chain, the only one) is moved out, not copied; the ones
                // before it have run.
                item = jobs.removeLast()
                if head > 0 {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                }
            } else {
                item = jobs[head]
                head += 1
            }
            item.run()
        }
    }

    /// The block running on this thread, if it is one of ours.
    @usableFromInline
    static var current: DrainContext? {
        guard let pointer = pthread_getspecific(slot) else { return nil }
        return Unmanaged<DrainContext>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Schedules `job` on `queue`: it joins the block this thread dispatched last if that
    /// block is for `queue` and has not finished; otherwise it dispatches a new block.
    @usableFromInline
    static func dispatch(_ job: @escaping Job, on queue: DispatchQueue) {
        dispatch(DrainItem.job(job), on: queue)
    }

    /// Schedules the pending handler of `ready` on `queue`, as ``dispatch(_:on:)-(Job,_)`` does
    /// a job.
    @usableFromInline
    static func dispatch(_ ready: ReadyFuture, on queue: DispatchQueue) {
        dispatch(DrainItem.ready(ready), on: queue)
    }

    private static func dispatch(_ item: DrainItem, on queue: DispatchQueue) {
        let key = ObjectIdentifier(queue)
        if let last = Batch.last, last.queue == key, last.join(item) { return }
        start(Batch(queue: key, jobs: [item]), on: queue)
    }

    /// Schedules `jobs`, in order, on `queue`, joining a block like one job does.
    @usableFromInline
    static func dispatch(_ jobs: [Job], on queue: DispatchQueue) {
        let key = ObjectIdentifier(queue)
        let items = jobs.map(DrainItem.job)
        if let last = Batch.last, last.queue == key, last.join(contentsOf: items) { return }
        start(Batch(queue: key, jobs: items), on: queue)
    }

    private static func start(_ batch: Batch, on queue: DispatchQueue) {
        Batch.last = batch
        queue.async { drain(batch, on: queue) }
    }

    /// The block a batch dispatches: runs the batch's jobs in order, each followed by the
    /// jobs it scheduled on `queue` itself, and the jobs that join the batch meanwhile, until
    /// none is left (or it has run ``Batch/fairnessBudget`` jobs, so that other blocks on
    /// `queue` get their turn); then it closes the batch.
    private static func drain(_ batch: Batch, on queue: DispatchQueue) {
        let context = DrainContext(queue: queue, batch: batch)
        let previous = pthread_getspecific(slot)
        pthread_setspecific(slot, Unmanaged.passUnretained(context).toOpaque())
        var budget = Batch.fairnessBudget
        while let jobs = batch.take(mayGoOn: budget > 0) {
            for job in jobs {
                job.run()
                context.runNested()
            }
            budget -= jobs.count
        }
        pthread_setspecific(slot, previous)
        withExtendedLifetime(context) {}
    }

    private static let slot: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}

/// The jobs of one dispatched block, which jobs may join until the block closes it.
///
/// It names its queue by `ObjectIdentifier` and holds no reference to it, so the batch a
/// thread remembers keeps no queue alive. The identifier cannot be reused while a job could
/// still join: until the block closes the batch, the dispatched block retains the queue.
final class Batch: Sendable {
    private struct State {
        var jobs: [DrainItem]
        var closed = false
    }

    let queue: ObjectIdentifier
    private let state: Mutex<State>
    /// How many jobs one block runs before it closes its batch (later jobs dispatch a new
    /// block, behind whatever else was dispatched on the queue meanwhile).
    static var fairnessBudget: Int { 4_096 }

    init(queue: ObjectIdentifier, jobs: [DrainItem]) {
        self.queue = queue
        self.state = Mutex(State(jobs: jobs))
    }

    /// Appends `job` unless the batch is closed; `false` when it is.
    func join(_ job: DrainItem) -> Bool {
        state.withLock { state -> Bool in
            if state.closed { return false }
            state.jobs.append(job)
            return true
        }
    }

    /// Appends `jobs` unless the batch is closed; `false` when it is.
    func join(contentsOf jobs: [DrainItem]) -> Bool {
        state.withLock { state -> Bool in
            if state.closed { return false }
            state.jobs.append(contentsOf: jobs)
            return true
        }
    }

    /// Takes the jobs waiting in the batch; when there are none, closes the batch and returns
    /// `nil`. Once `mayGoOn` is false (the fairness budget is spent), closes the batch at once
    /// and returns what is left, if anything.
    func take(mayGoOn: Bool) -> [DrainItem]? {
        take(closing: mayGoOn ? .ifEmpty : .always)
    }

    /// Closes the batch to new jobs; the jobs it holds still run.
    func close() {
        state.withLock { $0.closed = true }
    }

    private enum Closing { case ifEmpty, always }

    private func take(closing: Closing) -> [DrainItem]? {
        state.withLock { state -> [DrainItem]? in
            switch closing {
            case .ifEmpty: if state.jobs.isEmpty { state.closed = true }
            case .always: state.closed = true
            }
            if state.jobs.isEmpty { return nil }
            var jobs: [DrainItem] = []
            swap(&jobs, &state.jobs)
            return jobs
        }
    }

    /// The batch this thread dispatched last (retained by the thread until it dispatches
    /// another one, or exits).
    static var last: Batch? {
        get {
            guard let pointer = pthread_getspecific(lastSlot) else { return nil }
            return Unmanaged<Batch>.fromOpaque(pointer).takeUnretainedValue()
        }
        set {
            let old = pthread_getspecific(lastSlot)
            pthread_setspecific(lastSlot, newValue.map { Unmanaged.passRetained($0).toOpaque() })
            if let old {
                Unmanaged<Batch>.fromOpaque(old).release()
            }
        }
    }

    private static let lastSlot: pthread_key_t = {
        var key = pthread_key_t()
        // A thread that exits releases the batch it remembers.
        pthread_key_create(&key) { pointer in
            guard let pointer = pointer as UnsafeMutableRawPointer? else { return }
            Unmanaged<Batch>.fromOpaque(pointer).release()
        }
        return key
    }()
}

/// Not `Sendable`: a drain context belongs to the one thread that runs its block.
@available(*, unavailable)
extension DrainContext: Sendable {}
