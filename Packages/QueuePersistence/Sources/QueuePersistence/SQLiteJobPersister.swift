import Dispatch
import Foundation
public import Logging
public import QueueCore
import Synchronization

/// How hard SQLite works to keep a commit across a power loss.
public enum SQLiteJobPersisterSynchronous: Hashable, Sendable {
    /// `PRAGMA synchronous = FULL`: every commit is flushed to disk before it returns. A job
    /// whose `persist` returned survives `kill -9` and power loss. The default.
    case full
    /// `PRAGMA synchronous = NORMAL`: commits survive `kill -9`, but the last ones may be
    /// lost on power loss; faster, since the log is flushed only at checkpoints.
    case normal
}

/// The tunables of a ``SQLiteJobPersister``; every field has a default.
public struct SQLiteJobPersisterConfiguration: Sendable {
    /// Durability of commits; `.full` by default.
    public var synchronous: SQLiteJobPersisterSynchronous
    /// How long a write waits for another process's write lock before failing.
    public var busyTimeout: Duration
    /// At most this many concurrent `persist`/`delete` calls share one commit.
    public var maximumBatchSize: Int
    /// Where undecodable rows are reported; silent by default.
    public var logger: Logger

    /// Creates a configuration.
    /// - Parameters:
    ///   - synchronous: Durability of commits; `.full` by default.
    ///   - busyTimeout: How long to wait for another process's write lock; 5 s by default.
    ///   - maximumBatchSize: At most this many callers share a commit; 1,024 by default.
    ///   - logger: Where problems are reported; silent by default.
    public init(
        synchronous: SQLiteJobPersisterSynchronous = .full,
        busyTimeout: Duration = .seconds(5),
        maximumBatchSize: Int = 1024,
        logger: Logger = Logger(label: "QueueKit.SQLiteJobPersister", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.synchronous = synchronous
        self.busyTimeout = busyTimeout
        self.maximumBatchSize = maximumBatchSize
        self.logger = logger
    }
}

/// Stores a queue's jobs in a SQLite database (through GRDB); many queues may share one file.
///
/// ```swift
/// let persister = try SQLiteJobPersister(handling: CuteJob.self, queueName: "uploads", path: "/var/lib/app/jobs.sqlite")
/// let queue = try JobQueue(handling: CuteJob.self, name: "uploads", persister: persister)
/// ```
///
/// The database runs in WAL mode with `synchronous = FULL` unless
/// ``SQLiteJobPersisterConfiguration/synchronous`` says `.normal`: when `persist` returns, the
/// jobs are on disk. Concurrent `persist` and `delete` calls from many threads share commits
/// (group commit): each caller returns once its own jobs are durable, but one `fsync` serves
/// everyone who arrived while the previous commit was running. Jobs load in the order they
/// were first persisted, except that ``persistFirst(_:)`` puts jobs ahead of every stored one
/// (what `JobQueue.retry(_:)` uses). The schema is created by GRDB migrations; a file written by a newer
/// QueuePersistence is refused with ``PersistenceError/Code/incompatibleSchema``, and a file
/// that is not a database with ``PersistenceError/Code/corruptDatabase``.
public final class SQLiteJobPersister<JobType: QueueJob>: JobPersister, Sendable {
    /// This persister's durability and tuning.
    public typealias Configuration = SQLiteJobPersisterConfiguration

    /// The queue whose jobs this persister stores.
    public let queueName: String
    /// The database file.
    public let path: String
    let store: SQLiteJobStore
    private let logger: Logger
    private let issues = Mutex<[PersistenceError]>([])

    /// Opens (creating if needed) the database at `path` and stores `queueName`'s jobs in it.
    ///
    /// - Parameters:
    ///   - handling: The job type stored.
    ///   - queueName: The queue; other queues may use the same file.
    ///   - path: The database file; its folder is created if missing.
    ///   - configuration: Durability and tuning; `synchronous = FULL` by default.
    /// - Throws: ``PersistenceError``: `.corruptDatabase` when the file is not a SQLite
    ///   database, `.incompatibleSchema` when a newer library wrote it, `.storageUnavailable`
    ///   when it cannot be opened or created, or is read-only for this process (SQLite would open
    ///   it read-only, and every write would fail; open it again once it is writable).
    public init(
        handling: JobType.Type,
        queueName: String,
        path: String,
        configuration: Configuration = Configuration()
    ) throws {
        self.queueName = queueName
        self.store = try SQLiteJobStore.shared(path: path, configuration: configuration)
        self.path = store.path
        self.logger = configuration.logger
    }

    /// The problems the most recent ``load()`` met: one `.corruptJob` error per damaged row
    /// moved to the quarantine table, one `.undecodableJob` error (with the job's id) per
    /// intact row left in place; empty when every row loaded.
    public var loadIssues: [PersistenceError] {
        issues.withLock { $0 }
    }

    /// Stores `jobs` durably, in order, after every job already stored, in one transaction; a
    /// job whose `id` is already stored is replaced and keeps its place.
    /// - Parameter jobs: The jobs to store.
    /// - Throws: ``PersistenceError`` (`.encodingFailed`, `.writeFailed`, `.corruptDatabase`);
    ///   then none of the jobs is stored.
    public func persist(_ jobs: [JobType]) throws {
        guard !jobs.isEmpty else { return }
        var encoded: [(id: String, payload: Data)] = []
        encoded.reserveCapacity(jobs.count)
        for job in jobs {
            encoded.append((job.id, try JobCodec.encodeBinary(job)))
        }
        try store.submit(.upsert(queue: queueName, jobs: encoded))
    }

    /// Stores `jobs` durably, in order, before every job already stored, in one transaction; a
    /// job whose `id` is already stored is replaced and moved to the front.
    ///
    /// Each job's row gets a `sequence` one below the lowest of the whole file (the column
    /// orders rows and is shared by every queue of the file), the batch's last job first, so
    /// ``load()`` returns `jobs[0]` first. The transaction is committed like ``persist(_:)``'s,
    /// sharing a commit with concurrent callers; if the call throws, it was rolled back: none
    /// of the jobs is stored first and every job stored before is unchanged, in its place. An
    /// `id` listed twice is stored once, at its first place, with its last value. No schema
    /// change: files written before this method existed load as they did.
    /// - Parameter jobs: The jobs to store first, in the order they are to run.
    /// - Throws: ``PersistenceError`` (`.encodingFailed`, `.writeFailed`, `.corruptDatabase`);
    ///   then none of the jobs is stored first.
    public func persistFirst(_ jobs: [JobType]) throws {
        guard !jobs.isEmpty else { return }
        var order: [String] = []
        var payloads: [String: Data] = [:]
        for job in jobs {
            if payloads.updateValue(try JobCodec.encodeBinary(job), forKey: job.id) == nil { order.append(job.id) }
        }
        try store.submit(.upsertFirst(queue: queueName, jobs: order.map { ($0, payloads[$0] ?? Data()) }))
    }

    /// Deletes the stored copy of `job`, durably; a job that is not stored is ignored.
    /// - Parameter job: The job to delete (matched by `id`).
    /// - Throws: ``PersistenceError`` (`.deleteFailed`, `.corruptDatabase`); then the job stays stored.
    public func delete(_ job: JobType) throws {
        do {
            try store.submit(.delete(queue: queueName, id: job.id))
        } catch {
            guard error.code == .writeFailed else { throw error }
            // The commit failed (a full disk, another process's write lock): for a delete that is
            // `.deleteFailed`, as from FileBasedPersister.
            throw PersistenceError(code: .deleteFailed, message: error.message, path: error.path, jobID: job.id, underlying: error.underlying)
        }
    }

    /// Returns every stored job of this queue in stored order: the order it was first persisted
    /// in, with the jobs of each ``persistFirst(_:)`` call ahead of every job stored before it.
    ///
    /// The policy both QueuePersistence persisters share: a row whose bytes are damaged
    /// (empty, truncated, badly framed or nested too deep) is moved to the file's
    /// `queuePersistenceQuarantine` table and reported in ``loadIssues`` (`.corruptJob`); a
    /// row that is intact but that `JobType` no longer decodes is left in place, untouched,
    /// and reported (`.undecodableJob`, with its ``PersistenceError/jobID`` and the decoding
    /// error), and loads again once `JobType` decodes it; a read error fails the whole load.
    /// Rows are read in pages, and `JobType`'s `init(from:)` runs outside every database
    /// access and lock, so it may use the persister.
    /// - Returns: The stored jobs, in stored order.
    /// - Throws: ``PersistenceError`` (`.readFailed`, `.corruptDatabase`).
    public func load() throws -> [JobType] {
        // Decoding dominates a large load, so rows are read in pages (all from one snapshot)
        // and each page is decoded on every core; only one page of raw payloads is in memory
        // at a time.
        let workers = Self.decodingWorkers
        let pageSize = Self.pageSize
        var jobs: [JobType] = []
        var found: [PersistenceError] = []
        var corrupt: [(row: SQLiteJobStore.StoredRow, error: any Error)] = []
        try store.forEachPage(queue: queueName, limit: pageSize) { page in
            for (row, outcome) in zip(page, Self.decode(page, workers: workers)) {
                switch outcome {
                case .job(let job):
                    jobs.append(job)
                case .undecodable(let error):
                    found.append(
                        PersistenceError(
                            code: .undecodableJob,
                            message: "The stored job \(row.jobID) of queue \(queueName) is intact but is not a "
                                + "\(JobType.self) any more; it was left in the database and skipped. It loads again once "
                                + "\(JobType.self) can decode it.",
                            path: path,
                            jobID: row.jobID,
                            underlying: error
                        )
                    )
                case .corrupt(let error):
                    corrupt.append((row, error))
                }
            }
        }
        if !corrupt.isEmpty {
            var moved = true
            do {
                try store.quarantine(sequences: corrupt.map(\.row.sequence))
            } catch {
                moved = false
                logger.error("Corrupt job rows could not be quarantined", metadata: ["queue": "\(queueName)", "error": "\(error)"])
            }
            for (row, error) in corrupt {
                logger.error(
                    "Corrupt job row set aside",
                    metadata: ["queue": "\(queueName)", "job": "\(row.jobID)", "error": "\(error)"]
                )
                found.append(
                    PersistenceError(
                        code: .corruptJob,
                        message: "The stored bytes of job \(row.jobID) of queue \(queueName) are damaged; "
                            + (moved
                                ? "the row was moved to the \(SQLiteJobStore.quarantineTable) table and every other job was loaded."
                                : "it could not be moved to the \(SQLiteJobStore.quarantineTable) table and was skipped."),
                        path: path,
                        jobID: row.jobID,
                        underlying: error
                    )
                )
            }
        }
        for issue in found where issue.code == .undecodableJob {
            logger.error(
                "Undecodable job row skipped",
                metadata: ["queue": "\(queueName)", "job": "\(issue.jobID ?? "")", "error": "\(issue.underlying.map { "\($0)" } ?? "")"]
            )
        }
        issues.withLock { $0 = found }
        return jobs
    }

    /// How many threads decode a page of rows.
    static var decodingWorkers: Int { max(1, min(8, ProcessInfo.processInfo.activeProcessorCount)) }

    /// How many rows ``load()`` reads at a time.
    static var pageSize: Int { 2048 * decodingWorkers }

    /// What a stored row's payload holds (see ``outcome(_:)``).
    enum Outcome {
        case job(JobType)
        case undecodable(any Error)
        case corrupt(any Error)
    }

    /// Decodes a stored row's payload: a job, an intact row that `JobType` does not decode, or
    /// damaged bytes. The fuzz target `BinaryRowFuzzer` (`Fuzz/`) feeds it arbitrary bytes.
    static func outcome(_ payload: [UInt8]) -> Outcome {
        do {
            return .job(try BinaryJobCoder.decode(JobType.self, from: payload))
        } catch {
            do {
                try BinaryJobCoder.validate(payload)
            } catch let framing {
                return .corrupt(framing)
            }
            return .undecodable(error)
        }
    }

    /// Decodes `rows` on up to `workers` threads, keeping their order.
    private static func decode(_ rows: [SQLiteJobStore.StoredRow], workers: Int) -> [Outcome] {
        guard rows.count > 256, workers > 1 else {
            return rows.map { outcome($0.payload) }
        }
        let slice = (rows.count + workers - 1) / workers
        let slots = Mutex<[[Outcome]]>(Array(repeating: [], count: workers))
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let range = min(rows.count, worker * slice)..<min(rows.count, (worker + 1) * slice)
            let decoded = rows[range].map { outcome($0.payload) }
            slots.withLock { $0[worker] = decoded }
        }
        return slots.withLock { $0.flatMap { $0 } }
    }

    /// Deletes every stored job of this queue (other queues in the file are kept), then calls
    /// `completion` with the error, if any.
    /// - Parameter completion: Called once, on the calling thread, before `clear` returns.
    public func clear(completion: (@Sendable ((any Error)?) -> Void)?) {
        do {
            try store.submit(.clear(queue: queueName))
            completion?(nil)
        } catch {
            completion?(error)
        }
    }
}
