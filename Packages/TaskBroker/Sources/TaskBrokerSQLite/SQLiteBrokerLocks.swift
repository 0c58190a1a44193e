#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import TaskBrokerCore

/// Keeps the brokers of different processes that share one SQLite file apart: a broker holds a
/// POSIX record lock on one byte of `<database>-taskbroker.lock`, at an offset given by its name.
/// The same file carries the commit signal: a process that committed a change writes its first
/// byte (`signal()`), which the other processes' `ExternalChangeWatcher` sees through inotify.
///
/// The operating system releases a process's locks when it dies (SIGKILL, power loss), so a
/// crashed worker never blocks the next one. Record locks belong to the process: brokers of one
/// process do not conflict through them (`ClaimRegistry` keeps those apart), and closing any
/// descriptor of the file would release every lock of the process on it, so the file is opened
/// once and kept open for the life of the process.
final class SQLiteBrokerLocks: Sendable {
    let path: String
    private let descriptor = Mutex<Int32>(-1)

    init(databasePath: String) {
        path = databasePath + "-taskbroker.lock"
    }

    /// Tells the other processes' watchers that a change was committed: writes the file's first
    /// byte (no fsync; the change itself is durable in the database). Best effort: a failure only
    /// delays other processes until the next signal.
    func signal() {
        guard let fd = try? openFile() else { return }
        var byte: UInt8 = 0x2A
        _ = pwrite(fd, &byte, 1, 0)
    }

    /// Locks `name` for this process.
    ///
    /// - Returns: `false` when another process holds it.
    /// - Throws: `TaskBrokerError` with code `.storageFailed` when the lock file cannot be opened.
    func lock(_ name: String) throws -> Bool {
        var record = Self.record(for: name, type: F_WRLCK)
        let fd = try openFile()
        if fcntl(fd, F_SETLK, &record) == 0 { return true }
        let code = errno
        if code == EAGAIN || code == EACCES { return false }
        throw TaskBrokerError(code: .storageFailed, message: "Could not lock \(path) (errno \(code)); check that the folder is writable.")
    }

    /// Releases the lock on `name`, if this process holds it.
    func unlock(_ name: String) {
        guard let fd = try? openFile() else { return }
        var record = Self.record(for: name, type: F_UNLCK)
        _ = fcntl(fd, F_SETLK, &record)
    }

    /// Whether another process holds the lock on `name` (its broker runs).
    func isHeldElsewhere(_ name: String) throws -> Bool {
        var record = Self.record(for: name, type: F_WRLCK)
        let fd = try openFile()
        guard fcntl(fd, F_GETLK, &record) == 0 else { return false }
        return Int32(record.l_type) != F_UNLCK
    }

    private func openFile() throws -> Int32 {
        try descriptor.withLock { descriptor in
            if descriptor >= 0 { return descriptor }
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                throw TaskBrokerError(
                    code: .storageFailed,
                    message: "Could not open the broker lock file \(path) (errno \(errno)); check that the folder is writable."
                )
            }
            descriptor = fd
            return fd
        }
    }

    /// The one-byte record of a name: FNV-1a of its UTF-8 bytes, below 2^40.
    private static func record(for name: String, type: Int32) -> flock {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        var record = flock()
        record.l_type = Int16(type)
        record.l_whence = Int16(SEEK_SET)
        record.l_start = off_t(hash % (1 << 40)) + 1
        record.l_len = 1
        return record
    }
}
