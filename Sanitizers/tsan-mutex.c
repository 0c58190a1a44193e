// ThreadSanitizer does not see Synchronization.Mutex's hand-over on Linux.
//
// Mutex (swift-6.3, Linux) takes and releases an uncontended lock with atomic operations that are
// inlined into our code, and so instrumented; but a contended lock is handed over by the kernel
// (futex FUTEX_LOCK_PI / FUTEX_UNLOCK_PI, in _MutexHandle._lockSlow / _unlockSlow inside
// libswiftSynchronization.so, which is not instrumented). ThreadSanitizer then sees no
// happens-before edge between the thread that unlocked and the thread that got the lock, and
// reports every access to the protected state as a race: a false positive. A 20-line program
// (four threads appending to one Mutex<[Int]>) shows it, and counts every append.
//
// This library, preloaded into the test processes by Scripts/sanitize.sh (LD_PRELOAD), wraps
// the three slow paths and adds exactly the edge the kernel provides: a release on the lock's
// address before _unlockSlow, an acquire after _lockSlow and after a successful _tryLockSlow.
// Nothing is suppressed: a race on state outside a Mutex, or one reached without taking it, is
// still reported. The __tsan_* functions are weak, so a process without ThreadSanitizer (swift
// itself, PostgreSQL) runs unchanged.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

extern void __tsan_acquire(void *addr) __attribute__((weak));
extern void __tsan_release(void *addr) __attribute__((weak));

#define SWIFTCC __attribute__((swiftcall))
// Clang's swift_context is the swiftself register (r13), where Swift passes an address-only self.
#define SELF __attribute__((swift_context))

typedef SWIFTCC void (*lock_slow_t)(uint32_t, SELF void *);
typedef SWIFTCC void (*unlock_slow_t)(SELF void *);
typedef SWIFTCC bool (*try_lock_slow_t)(SELF void *);

#define LOCK_SLOW "$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF"
#define UNLOCK_SLOW "$s15Synchronization12_MutexHandleV11_unlockSlowyyF"
#define TRY_LOCK_SLOW "$s15Synchronization12_MutexHandleV12_tryLockSlowSbyF"

static void *next(const char *name) {
    void *function = dlsym(RTLD_NEXT, name);
    if (function == NULL) abort();
    return function;
}

SWIFTCC void lock_slow(uint32_t owner, SELF void *handle) __asm__(LOCK_SLOW);
SWIFTCC void lock_slow(uint32_t owner, SELF void *handle) {
    static lock_slow_t real;
    if (real == NULL) real = (lock_slow_t)next(LOCK_SLOW);
    real(owner, handle);
    if (__tsan_acquire) __tsan_acquire(handle);
}

SWIFTCC void unlock_slow(SELF void *handle) __asm__(UNLOCK_SLOW);
SWIFTCC void unlock_slow(SELF void *handle) {
    static unlock_slow_t real;
    if (real == NULL) real = (unlock_slow_t)next(UNLOCK_SLOW);
    if (__tsan_release) __tsan_release(handle);
    real(handle);
}

SWIFTCC bool try_lock_slow(SELF void *handle) __asm__(TRY_LOCK_SLOW);
SWIFTCC bool try_lock_slow(SELF void *handle) {
    static try_lock_slow_t real;
    if (real == NULL) real = (try_lock_slow_t)next(TRY_LOCK_SLOW);
    bool locked = real(handle);
    if (locked && __tsan_acquire) __tsan_acquire(handle);
    return locked;
}
