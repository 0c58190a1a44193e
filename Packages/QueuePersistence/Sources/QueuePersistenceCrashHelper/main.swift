// `QueuePersistenceCrashHelper lock <database path>` holds SQLite's write lock (BEGIN EXCLUSIVE)
// until a line arrives on stdin: stdout "locked", then "released".
//
// Adds jobs through a persister until it is killed, printing `P <id>` once `persist` has
// returned for a job and `D <id>` once `delete` has returned. The crash test kills it with
// SIGKILL and checks that every acknowledged job is stored intact, exactly once.
//
// Usage: QueuePersistenceCrashHelper file|sqlite <folder or database path> <run tag> <threads>
//
// With a fifth argument `file-size-fault` it runs the file-size fault instead (one thread): 20
// jobs stored; then the file-size limit (RLIMIT_FSIZE, this process only) lowered to one byte, so
// that every write past it fails with EFBIG as on a full disk, and 20 jobs tried, each printing
// `E <id> <error>` when `persist` throws, then job 5 stored first again with the action "first"
// (`F <id>`, or `E <id> <error>` when `persistFirst` throws), and the first job deleted (`D <id>`,
// or `X <id> <error>` when `delete` throws); then the limit raised again, 20 more jobs stored, the
// second deleted, stored job 7 and new job 60 stored first (each `F <id>`).
//
// With a fifth argument `read-only-fault` and the file persister it runs the same steps with the
// queue folder made read-only (0555) instead of the size limit, as a user other than root (root
// ignores file modes: the helper then gives the folder to nobody and becomes nobody first). With
// the SQLite persister it runs `runSQLiteReadOnlyFault` (SQLiteReadOnlyFault.swift) as nobody, on
// a database whose folder it gives to nobody.
import Dispatch
import Foundation
import GRDB
import QueueCore
import QueuePersistence

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

struct CrashJob: QueueJob {
    var id: String
    var createdDate: Date
    var data: Data?
    var action: String
}

/// The payload a job with `id` carries, so that the test can check it came back intact.
func payload(for id: String) -> Data {
    Data(String(repeating: id + ";", count: 8).utf8)
}

/// Writes one whole line with a single `write(2)`, so lines from threads never interleave.
func say(_ line: String) {
    var line = line + "\n"
    line.withUTF8 { buffer in
        _ = write(1, buffer.baseAddress, buffer.count)
    }
}

func fail(_ message: String) -> Never {
    var line = message + "\n"
    line.withUTF8 { buffer in
        _ = write(2, buffer.baseAddress, buffer.count)
    }
    exit(1)
}

let arguments = CommandLine.arguments
if arguments.count == 3, arguments[1] == "lock" {
    do {
        let queue = try DatabaseQueue(path: arguments[2])
        // The transaction stays open for the whole access: this process does nothing else meanwhile.
        try queue.inDatabase { db in
            try db.execute(sql: "BEGIN EXCLUSIVE")
            say("locked")
            _ = readLine()
            try db.execute(sql: "COMMIT")
        }
        say("released")
        exit(0)
    } catch {
        fail("lock failed: \(error)")
    }
}
let faults = ["file-size-fault", "read-only-fault"]
guard arguments.count == 5 || (arguments.count == 6 && faults.contains(arguments[5])), let threads = Int(arguments[4]) else {
    fail("usage: QueuePersistenceCrashHelper file|sqlite PATH TAG THREADS [file-size-fault|read-only-fault]")
}
let location = arguments[2]
let tag = arguments[3]
let fault = arguments.count == 6 ? arguments[5] : nil

if fault == "read-only-fault" {
    // Root ignores file modes: run as nobody, on a folder nobody owns, so that a read-only folder
    // refuses this process as it refuses any user's.
    if geteuid() == 0 {
        let nobody: UInt32 = 65534
        let owned = arguments[1] == "sqlite" ? URL(fileURLWithPath: location).deletingLastPathComponent().path : location
        guard chown(owned, nobody, nobody) == 0, setgroups(0, nil) == 0, setgid(nobody) == 0, setuid(nobody) == 0 else {
            fail("read-only-fault: could not become nobody: \(errno)")
        }
    }
}

if fault == "read-only-fault", arguments[1] == "sqlite" {
    runSQLiteReadOnlyFault(path: location)
}

let persister: AnyJobPersister<CrashJob>
do {
    if arguments[1] == "sqlite" {
        persister = AnyJobPersister(try SQLiteJobPersister(handling: CrashJob.self, queueName: "crash", path: location))
    } else {
        persister = AnyJobPersister(
            FileBasedPersister(handling: CrashJob.self, queueName: "crash", directory: URL(fileURLWithPath: location))
        )
    }
} catch {
    fail("open failed: \(error)")
}
say("READY")

/// Job `index` of a fault run (the file-size and read-only faults).
func faultJob(_ index: Int) -> CrashJob {
    let id = "\(tag)-\(index)"
    return CrashJob(id: id, createdDate: Date(timeIntervalSinceReferenceDate: Double(index)), data: payload(for: id), action: "fault")
}

/// Runs `body` and prints `<done> <id>`, or `<failed> <id> <error>` on one line when it throws.
func report(_ id: String, done: String, failed: String, _ body: () throws -> Void) {
    do {
        try body()
        say("\(done) \(id)")
    } catch {
        say("\(failed) \(id) \(String(describing: error).replacingOccurrences(of: "\n", with: " "))")
    }
}

/// Stores jobs `range` one at a time, printing `P <id>` or `E <id> <error>` for each.
func store(_ range: Range<Int>, in persister: AnyJobPersister<CrashJob>) {
    for index in range {
        let job = faultJob(index)
        report(job.id, done: "P", failed: "E") { try persister.persist([job]) }
    }
}

#if canImport(Glibc)
let fileSizeResource = __rlimit_resource_t(RLIMIT_FSIZE.rawValue)
#else
let fileSizeResource = RLIMIT_FSIZE
#endif

/// Stores job `index`, with the action "first", before every stored job, printing `F <id>` or
/// `E <id> <error>`.
func storeFirst(_ index: Int, in persister: AnyJobPersister<CrashJob>) {
    var job = faultJob(index)
    job.action = "first"
    report(job.id, done: "F", failed: "E") { try persister.persistFirst([job]) }
}

/// Deletes job `index` (stored before the fault), printing `D <id>` or `X <id> <error>`.
func remove(_ index: Int, from persister: AnyJobPersister<CrashJob>) {
    let job = faultJob(index)
    report(job.id, done: "D", failed: "X") { try persister.delete(job) }
}

/// Sets the soft limit on the size of any file this process writes.
func limitFileSize(to bytes: rlim_t) {
    var limit = rlimit()
    guard getrlimit(fileSizeResource, &limit) == 0 else { fail("getrlimit: \(errno)") }
    limit.rlim_cur = min(bytes, limit.rlim_max)
    guard setrlimit(fileSizeResource, &limit) == 0 else { fail("setrlimit: \(errno)") }
}

/// Makes the queue folder read-only (0555), or writable again (0755).
func setQueueFolder(writable: Bool) {
    let folder = URL(fileURLWithPath: location).appendingPathComponent("crash").path
    guard chmod(folder, writable ? 0o755 : 0o555) == 0 else { fail("chmod \(folder): \(errno)") }
}

if let fault {
    // A write past the limit raises SIGXFSZ, which kills by default: ignored, the write fails
    // with EFBIG instead, which is what a full disk looks like to the persister (ENOSPC).
    signal(SIGXFSZ, SIG_IGN)
    store(0..<20, in: persister)
    if fault == "read-only-fault" { setQueueFolder(writable: false) } else { limitFileSize(to: 1) }
    store(20..<40, in: persister)
    storeFirst(5, in: persister)  // a retry during the fault: job 5 must stay as and where it was
    remove(0, from: persister)  // a completion during the fault
    // RLIM_INFINITY, clamped to the hard limit; or the folder writable again.
    if fault == "read-only-fault" { setQueueFolder(writable: true) } else { limitFileSize(to: rlim_t.max) }
    store(40..<60, in: persister)
    remove(1, from: persister)
    storeFirst(7, in: persister)
    storeFirst(60, in: persister)
    say("DONE")
    exit(0)
}

DispatchQueue.concurrentPerform(iterations: threads) { thread in
    for index in 0..<100_000 {
        let id = "\(tag)-\(thread)-\(index)"
        let job = CrashJob(
            id: id,
            createdDate: Date(timeIntervalSinceReferenceDate: Double(index)),
            data: payload(for: id),
            action: "crash"
        )
        do {
            try persister.persist([job])
            say("P \(id)")
            if index % 3 == 0 {
                try persister.delete(job)
                say("D \(id)")
            }
        } catch {
            fail("failed: \(error)")
        }
    }
}
