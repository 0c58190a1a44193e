#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the internal observers that a fill runs at once (callbacks without a queue: a
/// flattening `pipe` passing the inner future's result on, a timeout) as a loop on each thread.
///
/// Such an observer usually fills another future, whose own internal observers would then run
/// inside it, and so on: a loop written as recursion (each step's `pipe` returns the next step's
/// future) passes its last value back up through every step as nested calls, one per step, and
/// a long one overflowed the stack. Here an observer that becomes ready while another runs on
/// the same thread waits until that one returns, and the outermost runs them in order.
///
@usableFromInline
enum InlineLoop: Sendable {
    /// Runs `body` with `value` now, or, if this thread is already running an internal
    /// observer, once that one (and those that became ready before) returned.
    @usableFromInline
    static func run<Value: Sendable>(_ body: @escaping @Sendable (Value) -> Void, with value: Value) {
        let loop = ThreadLoop.current
        guard !loop.running else {
            loop.pending.append { body(value) }
            return
        }
        loop.running = true
        body(value)
        while loop.head < loop.pending.count {
            let job = loop.pending[loop.head]
            loop.head += 1
            job()
        }
        // A long loop's list is not kept: most runs append nothing.
        loop.pending.removeAll(keepingCapacity: loop.pending.count <= 64)
        loop.head = 0
        loop.running = false
    }
}

/// The state of ``InlineLoop`` on one thread. Confined to its thread (not `Sendable`): each
/// thread reaches only its own, through a thread-specific slot.
private final class ThreadLoop {
    var running = false
    var pending: [Job] = []
    var head = 0

    /// This thread's loop, made at its first use and released when the thread exits.
    static var current: ThreadLoop {
        if let pointer = pthread_getspecific(slot) {
            return Unmanaged<ThreadLoop>.fromOpaque(pointer).takeUnretainedValue()
        }
        let loop = ThreadLoop()
        pthread_setspecific(slot, Unmanaged.passRetained(loop).toOpaque())
        return loop
    }

    private static let slot: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            Unmanaged<ThreadLoop>.fromOpaque(pointer).release()
            #else
            if let pointer { Unmanaged<ThreadLoop>.fromOpaque(pointer).release() }
            #endif
        }
        return key
    }()
}

@available(*, unavailable)
extension ThreadLoop: Sendable {}
