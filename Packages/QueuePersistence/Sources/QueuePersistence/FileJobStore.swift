import Foundation
import Logging
import Synchronization

/// One queue folder on disk: one file per job, named `<sequence>-<encoded id>.job`.
///
/// The zero-padded sequence number is handed out in the order jobs are first stored and is
/// recovered from the file names when the folder is opened, so `load()` returns jobs in the
/// order they were added even when their `createdDate`s tie. Every persister of one folder in
/// a process shares one store (see ``shared(directory:)``), so they agree on the numbers.
final class FileJobStore: Sendable {
    /// What a load found: the stored payloads in order.
    struct StoredFile {
        let name: String
        let path: String
        let data: Data
    }

    private struct State {
        var isOpen = false
        var nextSequence: UInt64 = 1
        /// Job id -> file name.
        var index: [String: String] = [:]
    }

    let directory: String
    private let state = Mutex(State())

    private init(directory: String) {
        self.directory = directory
    }

    private struct WeakStore: Sendable {
        weak var store: FileJobStore?
    }

    private static let stores = Mutex<[String: WeakStore]>([:])

    /// The one store of `directory` in this process.
    static func shared(directory: URL) -> FileJobStore {
        let path = directory.standardizedFileURL.path
        return stores.withLock { stores in
            if let store = stores[path]?.store { return store }
            stores = stores.filter { $0.value.store != nil }
            let store = FileJobStore(directory: path)
            stores[path] = WeakStore(store: store)
            return store
        }
    }

    static let jobSuffix = ".job"
    static let temporaryPrefix = ".tmp-"
    static let corruptFolder = "corrupt"

    // MARK: - File names

    /// `<20-digit sequence>-<id>.job`, the id kept as is when it is made of letters,
    /// digits and `-`, every other byte written `_XX`; a long id is replaced by `=<hash>`
    /// (the id is inside the file anyway).
    static func fileName(sequence: UInt64, id: String) -> String {
        var encoded = ""
        for byte in id.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                encoded += "_" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        if encoded.utf8.count > 180 {
            encoded = "=" + QueueFolder.hexHash(id)
        }
        let digits = String(sequence)
        return String(repeating: "0", count: 20 - digits.count) + digits + "-" + encoded + jobSuffix
    }

    /// The sequence number and, unless the name carries a hash, the id of a job file name.
    static func parse(fileName: String) -> (sequence: UInt64, id: String?)? {
        guard fileName.hasSuffix(jobSuffix) else { return nil }
        let stem = fileName.utf8.dropLast(jobSuffix.utf8.count)
        guard stem.count >= 21, let dash = stem.firstIndex(of: UInt8(ascii: "-")),
            stem.distance(from: stem.startIndex, to: dash) == 20,
            let sequence = UInt64(String(decoding: stem[..<dash], as: UTF8.self))
        else { return nil }
        let encoded = Array(stem[stem.index(after: dash)...])
        if encoded.first == UInt8(ascii: "=") { return (sequence, nil) }
        var bytes: [UInt8] = []
        var position = 0
        while position < encoded.count {
            if encoded[position] == UInt8(ascii: "_") {
                guard position + 2 < encoded.count,
                    let byte = UInt8(String(decoding: encoded[(position + 1)...(position + 2)], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(byte)
                position += 3
            } else {
                bytes.append(encoded[position])
                position += 1
            }
        }
        return (sequence, String(decoding: bytes, as: UTF8.self))
    }

    // MARK: - Opening

    private func path(_ name: String) -> String {
        directory + "/" + name
    }

    /// Creates the folder, removes temporary files a crash left behind, and rebuilds the
    /// id index and the next sequence number from the file names. Runs once; retried on
    /// the next call after a failure.
    private func openIfNeeded(_ state: inout State, readID: (Data) throws -> String) throws(PersistenceError) {
        guard !state.isOpen else { return }
        let names: [String]
        do {
            try DurableFile.makeDirectory(directory)
            names = try DurableFile.list(directory)
        } catch {
            throw PersistenceError(
                code: .storageUnavailable,
                message: "The queue folder could not be created or read; check that the path is writable.",
                path: directory,
                underlying: error
            )
        }
        var index: [String: String] = [:]
        var next: UInt64 = 1
        for name in names.sorted() {
            if name.hasPrefix(Self.temporaryPrefix) {
                try? DurableFile.remove(path(name))
                continue
            }
            guard let (sequence, parsedID) = Self.parse(fileName: name) else { continue }
            next = max(next, sequence + 1)
            if let parsedID {
                index[parsedID] = name
            } else if let data = try? DurableFile.read(path(name)), let id = try? readID(data) {
                index[id] = name
            }
        }
        state.index = index
        state.nextSequence = next
        state.isOpen = true
    }

    /// Opens the folder now, so that a bad location is known early.
    func open(readID: (Data) throws -> String) throws(PersistenceError) {
        try state.withLock { state throws(PersistenceError) in
            try openIfNeeded(&state, readID: readID)
        }
    }

    // MARK: - Operations

    /// Stores the batch all or nothing: writes and flushes every job to a temporary file
    /// first, then renames each into place and flushes the folder once. A job already stored
    /// keeps its file, and so its place. When a write fails, the temporary files are removed
    /// and nothing changed; when a rename fails (which needs the folder itself to fail), the
    /// files of this batch's new jobs are removed again.
    func persist(_ jobs: [(id: String, payload: Data)], readID: (Data) throws -> String) throws(PersistenceError) {
        try state.withLock { state throws(PersistenceError) in
            try openIfNeeded(&state, readID: readID)
            var names: [(id: String, name: String, isNew: Bool)] = []
            names.reserveCapacity(jobs.count)
            var nextSequence = state.nextSequence
            var batchIndex: [String: String] = [:]
            for job in jobs {
                if let existing = batchIndex[job.id] ?? state.index[job.id] {
                    names.append((job.id, existing, false))
                } else {
                    let name = Self.fileName(sequence: nextSequence, id: job.id)
                    nextSequence += 1
                    batchIndex[job.id] = name
                    names.append((job.id, name, true))
                }
            }
            var written: [String] = []
            for (job, entry) in zip(jobs, names) {
                let temporary = path(Self.temporaryPrefix + entry.name)
                do {
                    try DurableFile.remove(temporary)
                    try DurableFile.writeNewFile(job.payload, to: temporary)
                    written.append(temporary)
                } catch {
                    for file in written { try? DurableFile.remove(file) }
                    throw PersistenceError(
                        code: .writeFailed,
                        message: "Job \(job.id) could not be written, so none of the \(jobs.count) job(s) was stored; "
                            + "check free space and permissions.",
                        path: path(entry.name),
                        jobID: job.id,
                        underlying: error
                    )
                }
            }
            // Sequence numbers are used up even if a rename fails, so that a name is never reused.
            state.nextSequence = nextSequence
            var renamed: [(id: String, name: String, isNew: Bool)] = []
            for entry in names where !renamed.contains(where: { $0.name == entry.name }) {
                do {
                    try DurableFile.rename(path(Self.temporaryPrefix + entry.name), to: path(entry.name))
                    renamed.append(entry)
                } catch {
                    for file in written { try? DurableFile.remove(file) }
                    for undo in renamed where undo.isNew { try? DurableFile.remove(path(undo.name)) }
                    try? DurableFile.syncDirectory(directory)
                    throw PersistenceError(
                        code: .writeFailed,
                        message: "Job \(entry.id) could not be moved into place, so the new jobs of this batch were "
                            + "removed again; check the queue folder.",
                        path: path(entry.name),
                        jobID: entry.id,
                        underlying: error
                    )
                }
            }
            for entry in names {
                state.index[entry.id] = entry.name
            }
            do {
                try DurableFile.syncDirectory(directory)
            } catch {
                throw PersistenceError(
                    code: .writeFailed,
                    message: "The queue folder could not be flushed to disk; the jobs may not survive a power loss.",
                    path: directory,
                    underlying: error
                )
            }
        }
    }

    /// Removes the job's file and flushes the folder; an unknown id does nothing.
    func delete(id: String, readID: (Data) throws -> String) throws(PersistenceError) {
        try state.withLock { state throws(PersistenceError) in
            try openIfNeeded(&state, readID: readID)
            guard let name = state.index[id] else { return }
            do {
                try DurableFile.remove(path(name))
                try DurableFile.syncDirectory(directory)
            } catch {
                throw PersistenceError(
                    code: .deleteFailed,
                    message: "Job \(id) could not be deleted; check the folder's permissions.",
                    path: path(name),
                    underlying: error
                )
            }
            state.index[id] = nil
        }
    }

    /// Removes every job file and flushes the folder.
    func clear(readID: (Data) throws -> String) throws(PersistenceError) {
        try state.withLock { state throws(PersistenceError) in
            try openIfNeeded(&state, readID: readID)
            do {
                for name in try DurableFile.list(directory) where Self.parse(fileName: name) != nil {
                    try DurableFile.remove(path(name))
                }
                try DurableFile.syncDirectory(directory)
            } catch {
                throw PersistenceError(
                    code: .deleteFailed,
                    message: "The queue folder could not be cleared; check its permissions.",
                    path: directory,
                    underlying: error
                )
            }
            state.index = [:]
        }
    }

    /// What a load found in one file.
    enum Found<Job> {
        case job(id: String, Job)
        /// The bytes are intact (they parse, and name an id) but the job type does not decode them.
        case undecodable(id: String, any Error)
        /// The bytes are damaged: empty, truncated, not the format, or no id.
        case corrupt(any Error)
    }

    /// Reads every job file in sequence order and hands each to `classify`, outside the lock:
    /// `classify` runs the job type's `init(from:)`, which is the user's code. Corrupt files
    /// are moved to `corrupt/`; undecodable ones stay where they are, reported; a file that
    /// cannot be read fails the load.
    func load<Job>(
        readID: (Data) throws -> String,
        classify: (Data) -> Found<Job>,
        logger: Logger
    ) throws(PersistenceError) -> (jobs: [Job], issues: [PersistenceError]) {
        try state.withLock { state throws(PersistenceError) in
            try openIfNeeded(&state, readID: readID)
        }
        let names: [String]
        do {
            names = try DurableFile.list(directory)
        } catch {
            throw PersistenceError(
                code: .readFailed,
                message: "The queue folder could not be listed; check its permissions, then load again.",
                path: directory,
                underlying: error
            )
        }
        let files = names.compactMap { name in Self.parse(fileName: name).map { (name, $0.sequence) } }
            .sorted { ($0.1, $0.0) < ($1.1, $1.0) }
        var jobs: [Job] = []
        jobs.reserveCapacity(files.count)
        var issues: [PersistenceError] = []
        var seen: [String: String] = [:]
        var corrupt: [(name: String, cause: any Error)] = []
        var duplicates: [(name: String, kept: String)] = []
        for (name, _) in files {
            let data: Data
            do {
                data = try DurableFile.read(path(name))
            } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
                continue // Deleted since the folder was listed.
            } catch {
                throw PersistenceError(
                    code: .readFailed,
                    message: "The job file \(name) could not be read; nothing was moved or deleted. Check the disk "
                        + "and the file's permissions, then load again.",
                    path: path(name),
                    underlying: error
                )
            }
            switch classify(data) {
            case .job(let id, let job):
                if let previous = seen[id] {
                    // Two files for one id (only a foreign copy can do this): keep the first.
                    duplicates.append((name, previous))
                    continue
                }
                seen[id] = name
                jobs.append(job)
            case .undecodable(let id, let error):
                seen[id] = seen[id] ?? name
                issues.append(
                    PersistenceError(
                        code: .undecodableJob,
                        message: "The stored job \(id) (file \(name)) is intact but is not a \(Job.self) any more; it "
                            + "was left in place and skipped. It loads again once \(Job.self) can decode it.",
                        path: path(name),
                        jobID: id,
                        underlying: error
                    )
                )
            case .corrupt(let error):
                corrupt.append((name, error))
            }
        }
        for (name, kept) in duplicates {
            logger.warning("Duplicate job file ignored", metadata: ["file": "\(name)", "kept": "\(kept)"])
        }
        for (name, cause) in corrupt {
            let moved = state.withLock { state in
                let moved = quarantine(name, cause: cause)
                if let id = state.index.first(where: { $0.value == name })?.key {
                    state.index[id] = nil
                }
                return moved
            }
            switch moved {
            case .success(let destination):
                logger.error(
                    "Corrupt job file moved aside",
                    metadata: ["file": "\(name)", "movedTo": "\(destination)", "error": "\(cause)"]
                )
                issues.append(
                    PersistenceError(
                        code: .corruptJob,
                        message: "The job file \(name) is empty, truncated or not a job; it was moved to "
                            + "\(destination) and every other job was loaded.",
                        path: destination,
                        underlying: cause
                    )
                )
            case .failure(let error):
                logger.error(
                    "Corrupt job file could not be moved aside",
                    metadata: ["file": "\(path(name))", "error": "\(error)"]
                )
                issues.append(
                    PersistenceError(
                        code: .corruptJob,
                        message: "The job file \(name) is empty, truncated or not a job, and could not be moved to "
                            + "\(Self.corruptFolder)/; it was skipped.",
                        path: path(name),
                        underlying: cause
                    )
                )
            }
        }
        return (jobs, issues)
    }

    /// Moves a corrupt file into `corrupt/` (never deletes it); returns where it went.
    private func quarantine(_ name: String, cause: any Error) -> Result<String, any Error> {
        let corruptDirectory = path(Self.corruptFolder)
        var destination = corruptDirectory + "/" + name
        do {
            try DurableFile.makeDirectory(corruptDirectory)
            var attempt = 1
            while FileManager.default.fileExists(atPath: destination) {
                attempt += 1
                destination = corruptDirectory + "/" + name + "." + String(attempt)
            }
            try DurableFile.rename(path(name), to: destination)
            try DurableFile.syncDirectory(corruptDirectory)
            try DurableFile.syncDirectory(directory)
            return .success(destination)
        } catch {
            return .failure(error)
        }
    }
}
