import Foundation
import QueueCore
import QueuePersistence

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// The read-only fault on a SQLite database (`sqlite PATH TAG 1 read-only-fault`), run as a user
/// other than root (main.swift gives the database's folder to nobody and becomes nobody first).
///
/// Two rounds, each: the fault starts while a persister has the database open, that persister
/// stores, stores first and deletes (`P`, `F`, `D`, or `E`/`X` with the error); the process
/// "restarts" during the fault: the persister is released, so that every connection closes, and
/// a new one is opened (`O`, or `N <error>` when the initializer throws; an opened one stores two
/// jobs); the fault ends and a persister is opened again (`O`/`N`). Round 1 (`ROUND file`) makes
/// the database file read-only (0444) and leaves its folder writable, so that the last
/// connection's close removes the `-wal` and `-shm` files; round 2 (`ROUND file,folder`) makes the
/// folder read-only (0555) as well. Then 20 more jobs are stored, one deleted, one stored job and
/// one new job stored first, and `DONE`.
///
/// Job indexes: 0..<20 before; round 1: 20..<25 during, 25..<27 after a restart during the
/// fault, 27..<30 after it, 5 stored first and 0 deleted during it; round 2: 30..<35, 35..<37,
/// 37..<40, 9 first, 1 deleted; then 40..<60, 2 deleted, 7 and 60 first.
func runSQLiteReadOnlyFault(path: String) -> Never {
    let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
    func open() -> AnyJobPersister<CrashJob>? {
        do {
            let persister = try SQLiteJobPersister(handling: CrashJob.self, queueName: "crash", path: path)
            say("O")
            return AnyJobPersister(persister)
        } catch {
            say("N \(String(describing: error).replacingOccurrences(of: "\n", with: " "))")
            return nil
        }
    }
    func setReadOnly(_ readOnly: Bool, folderToo: Bool) {
        guard chmod(path, readOnly ? 0o444 : 0o644) == 0 else { fail("chmod \(path): \(errno)") }
        if folderToo {
            guard chmod(folder, readOnly ? 0o555 : 0o755) == 0 else { fail("chmod \(folder): \(errno)") }
        }
    }

    // Only this variable holds a persister: setting it to nil closes every connection.
    var persister = open()
    guard persister != nil else { fail("open failed") }
    say("READY")
    if let persister { store(0..<20, in: persister) }
    for (round, (folderToo, first, deleted)) in [(false, 5, 0), (true, 9, 1)].enumerated() {
        let base = 20 + 10 * round
        say(folderToo ? "ROUND file,folder" : "ROUND file")
        setReadOnly(true, folderToo: folderToo)
        if let persister {
            store(base..<base + 5, in: persister)
            storeFirst(first, in: persister)
            remove(deleted, from: persister)
        }
        say("RESTART")
        persister = nil
        persister = open()
        if let persister { store(base + 5..<base + 7, in: persister) }
        say("RESTORED")
        setReadOnly(false, folderToo: folderToo)
        persister = nil
        persister = open()
        if let persister { store(base + 7..<base + 10, in: persister) }
    }
    if let persister {
        store(40..<60, in: persister)
        remove(2, from: persister)
        storeFirst(7, in: persister)
        storeFirst(60, in: persister)
    }
    say("DONE")
    exit(0)
}
