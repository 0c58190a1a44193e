#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import Synchronization
import TaskBrokerCore

/// Tells the brokers of this process which queues other processes changed in a shared SQLite
/// file, so that an action another process saves starts without polling.
///
/// Every save, delete, resume and purge appends the names of the queues it changed to the file's
/// change journal (`taskbroker_change`), with the writing process's token. On Linux the watcher
/// learns of each commit of any process through inotify (the write-ahead log is written), reads
/// the journal past what it has seen, and delivers the queues other processes changed as
/// `TaskChange/external(queueNames:)`. Changes of this process already reach the brokers
/// directly, so they are skipped. A watcher that fell behind the journal's pruning has every queue
/// read again instead: those stored, and those the brokers hold (emptied meanwhile, perhaps).
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
        watch = FileWatch(file: signalFile, queue: queue)
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
        if read.fellBehind {
            // Entries were pruned before this process read them: every queue may have changed,
            // those a broker holds that are now empty (deleted, purged) included.
            guard let all = try? storage.queueNamesBlocking() else { return }  // read again next time
            lastSeen.withLock { $0 = read.latest }
            notifier.notify([.externalEverywhere(storedQueues: all)])
            return
        }
        var seen: Set<String> = []
        let names = read.entries.filter { $0.origin != ProcessIdentity.token && seen.insert($0.queueName).inserted }.map(\.queueName)
        lastSeen.withLock { $0 = read.latest }
        // A commit that names nothing (a run's completion, or this process's own change) still
        // changed what a console shows (`TaskDatabase.queueChanges()`).
        notifier.notify(names.isEmpty ? [.touched] : [.external(queueNames: names)])
    }
}

/// Calls back when a file is written: inotify on Linux, on the file itself (a watch on its folder
/// would also wake for every write of the database's write-ahead log next to it). Elsewhere it
/// watches nothing (`init` returns `nil`): only changes made through this process are seen there.
final class FileWatch: Sendable {
    #if canImport(Glibc)
    private let descriptor: Int32
    /// Dispatch sources are not `Sendable` on Linux: the mutex hands it out to one caller at a time.
    private let source: Mutex<any DispatchSourceRead>
    #endif

    /// Watches `file`, which must exist.
    init?(file: String, queue: DispatchQueue) {
        #if canImport(Glibc)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        guard inotify_add_watch(fd, file, UInt32(IN_MODIFY)) >= 0 else {
            close(fd)
            return nil
        }
        descriptor = fd
        source = Mutex(DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue))
        #else
        return nil
        #endif
    }

    /// Starts calling `onChange` (on the queue given at `init`) after each batch of writes.
    func start(_ onChange: @escaping @Sendable () -> Void) {
        #if canImport(Glibc)
        let fd = descriptor
        source.withLock { source in
            source.setEventHandler {
                if Self.drain(fd) { onChange() }
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
    /// Reads every pending event; whether there was one.
    private static func drain(_ fd: Int32) -> Bool {
        var any = false
        let size = 4096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        while read(fd, buffer, size) > 0 {
            any = true
        }
        return any
    }
    #endif
}
