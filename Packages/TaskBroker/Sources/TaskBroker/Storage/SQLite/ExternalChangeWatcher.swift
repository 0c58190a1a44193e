#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import Synchronization

/// Tells the brokers of this process which queues other processes changed in a shared SQLite
/// file, so that an action another process saves starts without polling.
///
/// Every save, delete, resume and purge appends the names of the queues it changed to the file's
/// change journal (`taskbroker_change`), with the writing process's token. On Linux the watcher
/// learns of each commit of any process through inotify (the write-ahead log is written), reads
/// the journal past what it has seen, and delivers the queues other processes changed as
/// ``TaskChange/external(queueNames:)``. Changes of this process already reach the brokers
/// directly, so they are skipped. A watcher that fell behind the journal's pruning rereads every
/// queue name instead.
///
/// Everything runs on one serial dispatch queue of its own (the journal read blocks briefly):
/// never on Swift's cooperative pool.
final class ExternalChangeWatcher: Sendable {
    private let storage: SQLiteTaskStorage
    private let notifier: ChangeNotifier
    private let queue = DispatchQueue(label: "TaskBroker.ExternalChangeWatcher")
    /// The newest journal entry read; touched on `queue` only.
    private let lastSeen: Mutex<Int64>
    private let watch: FileWatch?

    /// Starts watching.
    ///
    /// - Parameters:
    ///   - storage: The file's storage, to read the journal.
    ///   - head: The newest journal entry already reflected in what the brokers read.
    ///   - signalFile: The file writers touch after each commit. (Not the write-ahead log: it is
    ///     written before a commit becomes visible, so a read right after its event can miss it.)
    ///   - notifier: Where the changed queues go.
    init(storage: SQLiteTaskStorage, head: Int64, signalFile: String, notifier: ChangeNotifier) {
        self.storage = storage
        self.notifier = notifier
        lastSeen = Mutex(head)
        let url = URL(fileURLWithPath: signalFile)
        watch = FileWatch(directory: url.deletingLastPathComponent().path, names: [url.lastPathComponent], queue: queue)
        watch?.start { [weak self] in self?.check() }
    }

    func cancel() {
        watch?.cancel()
    }

    /// Reads the journal past `lastSeen` and delivers what other processes changed.
    private func check() {
        let after = lastSeen.withLock { $0 }
        let read: SQLiteTaskStorage.JournalRead
        do {
            read = try storage.readJournal(after: after)
        } catch {
            // Nothing is lost: `lastSeen` stays, and the next commit signalled by any process
            // (this one included) reads from there again.
            return
        }
        let names: [String]
        if read.fellBehind {
            // Entries were pruned before this process read them: every queue may have changed.
            guard let all = try? storage.queueNamesBlocking() else { return }  // read again next time
            names = all
        } else {
            var seen: Set<String> = []
            names = read.entries.filter { $0.origin != ProcessIdentity.token && seen.insert($0.queueName).inserted }.map(\.queueName)
        }
        lastSeen.withLock { $0 = read.latest }
        if !names.isEmpty {
            notifier.notify([.external(queueNames: names)])
        }
    }
}

/// Calls back when one of the named files in a folder is written, created or moved in: inotify
/// on Linux. Elsewhere it watches nothing (and `init` returns `nil`): only changes made through
/// this process are seen there.
final class FileWatch: Sendable {
    #if canImport(Glibc)
    private let descriptor: Int32
    /// Dispatch sources are not `Sendable` on Linux: the mutex hands it out to one caller at a time.
    private let source: Mutex<any DispatchSourceRead>
    private let names: Set<[UInt8]>
    #endif

    init?(directory: String, names: [String], queue: DispatchQueue) {
        #if canImport(Glibc)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        guard inotify_add_watch(fd, directory, UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO)) >= 0 else {
            close(fd)
            return nil
        }
        descriptor = fd
        self.names = Set(names.map { Array($0.utf8) })
        source = Mutex(DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue))
        #else
        return nil
        #endif
    }

    /// Starts calling `onChange` (on the queue given at `init`) after each batch of events that
    /// names one of the files.
    func start(_ onChange: @escaping @Sendable () -> Void) {
        #if canImport(Glibc)
        let fd = descriptor
        let names = self.names
        source.withLock { source in
            source.setEventHandler {
                if Self.drain(fd, matching: names) { onChange() }
            }
            source.setCancelHandler {
                close(fd)
            }
            source.resume()
        }
        #endif
    }

    func cancel() {
        #if canImport(Glibc)
        source.withLock { $0.cancel() }
        #endif
    }

    #if canImport(Glibc)
    /// Reads every pending event; whether one of them names a watched file.
    private static func drain(_ fd: Int32, matching names: Set<[UInt8]>) -> Bool {
        var matched = false
        let size = 4096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = read(fd, buffer, size)
            guard count > 0 else { break }
            var offset = 0
            // struct inotify_event: wd (4), mask (4), cookie (4), len (4), name[len] (NUL-padded).
            while offset + 16 <= count {
                let length = Int(buffer.load(fromByteOffset: offset + 12, as: UInt32.self))
                let nameStart = buffer.advanced(by: offset + 16).assumingMemoryBound(to: UInt8.self)
                var nameLength = 0
                while nameLength < length, nameStart[nameLength] != 0 { nameLength += 1 }
                if !matched, names.contains(Array(UnsafeBufferPointer(start: nameStart, count: nameLength))) {
                    matched = true
                }
                offset += 16 + length
            }
        }
        return matched
    }
    #endif
}
