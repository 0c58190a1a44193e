public import Foundation
public import Logging
public import QueueCore
import Synchronization

/// Stores a queue's jobs on the local file system, one crash-safe file per job.
///
/// ```swift
/// let name = "Observation Upload Queue"
/// let persister = FileBasedPersister(handling: ObservationUploadJob.self, queueName: name)
/// let queue = try JobQueue(handling: ObservationUploadJob.self, name: name, persister: persister)
/// ```
///
/// Files go to `<root>/<sanitized queue name>/`, where the root is, by default,
/// `$XDG_DATA_HOME/QueueKit/Queues` (or `~/.local/share/QueueKit/Queues`) on Linux and
/// `~/Library/Application Support/QueueKit/Queues` on Apple platforms. A safe name such as
/// "Uploads" is its own folder; "Observation Upload Queue" becomes `Observation-Upload-Queue`
/// (see ``folderName(forQueueName:)``); no queue name can reach outside the root, and no two
/// names share a folder (the second of two names that sanitize alike gets a hashed one).
///
/// Every write is atomic and durable: a temporary file is written and flushed (`fsync`),
/// renamed over its final name, and the folder is flushed, before `persist` returns. A job
/// whose `persist` returned survives `kill -9` and power loss. `load()` returns jobs in the
/// order they were first persisted, except that ``persistFirst(_:)`` puts jobs ahead of every
/// stored one (what `JobQueue.retry(_:)` uses). A damaged file is moved to the folder's `corrupt/`
/// sub-folder; an intact job that the type no longer decodes stays in place; both are listed
/// in ``loadIssues`` and every other job loads (see ``load()``).
///
/// One process should own a folder; persisters of the same folder within a process share
/// their state, so they may be created and dropped freely.
public final class FileBasedPersister<JobType: QueueJob>: JobPersister, Sendable {
    /// The queue name as given.
    public let queueName: String
    private let root: Result<URL, PersistenceError>
    /// The queue folder's store, once found (``openStore()``).
    private let resolved = Mutex<FileJobStore?>(nil)
    private let logger: Logger
    private let issues = Mutex<[PersistenceError]>([])

    /// Creates a persister for `queueName` in the platform's default folder.
    ///
    /// Never throws and never crashes: when the default folder cannot be determined or
    /// created (no `HOME`, a read-only disk), the first ``persist(_:)``, ``delete(_:)`` or
    /// ``load()`` throws a ``PersistenceError`` with code `.storageUnavailable`.
    /// - Parameters:
    ///   - handling: The job type stored.
    ///   - queueName: The queue's name; sanitized into one folder name.
    ///   - logger: Where corrupt files are reported; silent by default.
    public convenience init(
        handling: JobType.Type,
        queueName: String,
        logger: Logger = Logger(label: "QueueKit.FileBasedPersister", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        let root: Result<URL, PersistenceError>
        do {
            root = .success(try QueueFolder.defaultRoot())
        } catch {
            root = .failure(error)
        }
        self.init(handling: handling, queueName: queueName, root: root, logger: logger)
    }

    /// Creates a persister whose files go to `directory/<sanitized queue name>/`.
    ///
    /// Several queues may share one `directory`: each gets its own sub-folder.
    /// - Parameters:
    ///   - handling: The job type stored.
    ///   - queueName: The queue's name; sanitized into one folder name.
    ///   - directory: A file URL of the folder that holds the queue folders; created if missing.
    ///   - logger: Where corrupt files are reported; silent by default.
    public convenience init(
        handling: JobType.Type,
        queueName: String,
        directory: URL,
        logger: Logger = Logger(label: "QueueKit.FileBasedPersister", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.init(handling: handling, queueName: queueName, root: .success(directory), logger: logger)
    }

    private init(handling: JobType.Type, queueName: String, root: Result<URL, PersistenceError>, logger: Logger) {
        self.queueName = queueName
        self.logger = logger
        self.root = root
        // Create the folder now so that it exists; a failure is reported by the first call.
        if let store = try? openStore() {
            try? store.open(readID: Self.id(from:))
        }
    }

    /// The folder that holds this queue's job files, or `nil` when it is not known (yet): the
    /// default location could not be determined, or the folder's owner could not be read.
    public var directory: URL? {
        guard let store = try? openStore() else { return nil }
        return URL(fileURLWithPath: store.directory, isDirectory: true)
    }

    /// The folder name a queue name becomes. A name made only of letters, digits, `-`, `_`
    /// and `.` (no leading dot) is kept as it is; a space becomes `-`, as in the seed
    /// ("Observation Upload Queue" -> "Observation-Upload-Queue"); any other character becomes
    /// `-` and a hash of the whole name is appended. Two names that still end up alike never share
    /// a folder: the first queue to open one owns it (its name is recorded in the folder), and
    /// the other gets this name plus a hash of its own. ``directory`` is the folder in use.
    /// - Parameter queueName: A queue name.
    /// - Returns: One safe path component.
    public static func folderName(forQueueName queueName: String) -> String {
        QueueFolder.sanitize(queueName)
    }

    /// The platform's default root folder for queues (`…/QueueKit/Queues`).
    /// - Returns: The folder's file URL.
    /// - Throws: ``PersistenceError`` `.storageUnavailable` when it cannot be determined.
    public static func defaultRootDirectory() throws(PersistenceError) -> URL {
        try QueueFolder.defaultRoot()
    }

    /// The problems the most recent ``load()`` met: one `.corruptJob` error per damaged file
    /// moved to `corrupt/`, one `.undecodableJob` error (with the job's id) per intact job
    /// left in place; empty when every file loaded.
    public var loadIssues: [PersistenceError] {
        issues.withLock { $0 }
    }

    /// The queue folder's store, found at the first call that succeeds: a folder whose owner
    /// cannot be read now (a transient EMFILE, say) is looked up again at the next call.
    private func openStore() throws(PersistenceError) -> FileJobStore {
        if let store = resolved.withLock({ $0 }) { return store }
        let folder = try QueueFolder.resolve(queueName, in: try root.get())
        let store = FileJobStore.shared(directory: folder)
        return resolved.withLock { resolved in
            if let resolved { return resolved }
            resolved = store
            return store
        }
    }

    /// Stores `jobs` durably, in order, after every job already stored; a job whose `id` is
    /// already stored is replaced and keeps its place.
    ///
    /// All or nothing: every job is written and flushed to a temporary file first, then moved
    /// into place; if the call throws, none of the batch's new jobs is stored.
    /// - Parameter jobs: The jobs to store.
    /// - Throws: ``PersistenceError`` (`.storageUnavailable`, `.encodingFailed`, `.writeFailed`).
    public func persist(_ jobs: [JobType]) throws {
        let store = try openStore()
        var encoded: [(id: String, payload: Data)] = []
        encoded.reserveCapacity(jobs.count)
        for job in jobs {
            encoded.append((job.id, try JobCodec.encode(job)))
        }
        try store.persist(encoded, readID: Self.id(from:))
    }

    /// Stores `jobs` durably, in order, before every job already stored; a job whose `id` is
    /// already stored is replaced and moved to the front.
    ///
    /// The jobs get file numbers below the lowest in use, so ``load()`` returns `jobs[0]` first,
    /// and so does every persister that opens the folder later. All or nothing, like
    /// ``persist(_:)``: every job is written and flushed to a temporary file first, then moved
    /// into place, and the folder is flushed; if the call throws, none of the batch's jobs is
    /// stored first and every job stored before is unchanged, in its place. A moved job's old
    /// file is removed after its new one is on disk, so a crash in between leaves both (the
    /// new one loads, and the next persister to open the folder removes the old one) and never
    /// neither. An `id` listed twice is stored once, at its first place, with its last value.
    ///
    /// A folder written before this method existed numbers its jobs from 1: the first call
    /// that needs room below them renames each job file once (a flush per file), keeping the
    /// order however a crash interrupts it.
    /// - Parameter jobs: The jobs to store first, in the order they are to run.
    /// - Throws: ``PersistenceError`` (`.storageUnavailable`, `.encodingFailed`, `.writeFailed`).
    public func persistFirst(_ jobs: [JobType]) throws {
        let store = try openStore()
        var encoded: [(id: String, payload: Data)] = []
        encoded.reserveCapacity(jobs.count)
        for job in jobs {
            encoded.append((job.id, try JobCodec.encode(job)))
        }
        try store.persistFirst(encoded, readID: Self.id(from:))
    }

    /// Deletes the stored copy of `job`; a job that is not stored is ignored.
    /// - Parameter job: The job to delete (matched by `id`).
    /// - Throws: ``PersistenceError`` (`.storageUnavailable`, `.deleteFailed`).
    public func delete(_ job: JobType) throws {
        try openStore().delete(id: job.id, readID: Self.id(from:))
    }

    /// Returns every stored job in stored order: the order it was first persisted in, with the
    /// jobs of each ``persistFirst(_:)`` call ahead of every job stored before that call.
    ///
    /// The policy both QueuePersistence persisters share: a file whose bytes are damaged
    /// (empty, truncated, not JSON, neither a `JobType` nor an `id` key) is moved to `corrupt/`
    /// and reported in ``loadIssues`` (`.corruptJob`); a file that is intact but that `JobType` no longer
    /// decodes is left in place, untouched, and reported (`.undecodableJob`, with its
    /// ``PersistenceError/jobID`` and the decoding error), and loads again once `JobType`
    /// decodes it; a file that cannot be read (an I/O error) fails the whole load, moving and
    /// deleting nothing. `JobType`'s `init(from:)` runs outside every lock of the persister,
    /// so it may call the persister.
    /// - Returns: The stored jobs, in stored order.
    /// - Throws: ``PersistenceError`` `.readFailed` when the folder or a job file cannot be
    ///   read (retrying is the caller's choice), `.storageUnavailable` when the folder is unusable.
    public func load() throws -> [JobType] {
        let decoder = JSONDecoder()
        let (jobs, found) = try openStore().load(
            readID: Self.id(from:),
            classify: { (data: Data) in Self.classify(data, decoder: decoder) },
            logger: logger
        )
        issues.withLock { $0 = found }
        return jobs
    }

    /// What a job file's bytes hold: a job, an intact job that `JobType` does not decode, or
    /// damaged bytes. The fuzz target `FileJobFuzzer` (`Fuzz/`) feeds it arbitrary bytes.
    ///
    /// `JobType` decodes the bytes first: a job type that names its id otherwise than `"id"` in
    /// its coding keys (or codes itself by hand) is still a job. Only bytes that `JobType` does
    /// not decode are read for an `"id"` key: with one they are an intact job of an older shape,
    /// without one damaged bytes.
    static func classify(_ data: Data, decoder: JSONDecoder) -> FileJobStore.Found<JobType> {
        let decodingError: any Error
        do {
            let job = try decoder.decode(JobType.self, from: data)
            return .job(id: job.id, job)
        } catch {
            decodingError = error
        }
        do {
            return .undecodable(id: try JobCodec.id(from: data), decodingError)
        } catch {
            return .corrupt(error)
        }
    }

    /// The id of the job a file holds: `JobType`'s, or else an `"id"` key's (the store reads it
    /// for files whose name carries a hash of the id, and to tell a job's file from an older copy).
    static func id(from data: Data) throws -> String {
        if let job = try? JSONDecoder().decode(JobType.self, from: data) { return job.id }
        return try JobCodec.id(from: data)
    }

    /// Deletes every stored job of this queue, then calls `completion` with the error, if any.
    /// Files in `corrupt/` are kept.
    /// - Parameter completion: Called once, on the calling thread, before `clear` returns.
    public func clear(completion: (@Sendable ((any Error)?) -> Void)?) {
        do {
            try openStore().clear(readID: Self.id(from:))
            completion?(nil)
        } catch {
            completion?(error)
        }
    }
}
