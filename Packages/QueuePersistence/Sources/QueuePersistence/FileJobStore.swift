import Foundation
import Logging
import Synchronization

/// One queue folder on disk: one file per job, named `<sequence>-<encoded id>.job`.
///
/// The zero-padded sequence number is the job's place: `load()` returns jobs in sequence
/// order, even when their `createdDate`s tie. `persist` hands out numbers upwards from the
/// highest in use, `persistFirst` downwards from the lowest; a new folder starts both at
/// ``middleSequence``, which leaves room for 10^19 jobs stored first and 8 · 10^18 stored last.
/// The numbers are recovered from the file names when the folder is opened. Every persister
/// of one folder in a process shares one store (see ``shared(directory:)``), so they agree on
/// the numbers.
///
/// A folder written before `persistFirst` existed numbers its jobs from 1, so there is no room
/// below them: the first `persistFirst` that needs it moves every number below
/// ``middleSequence`` up by that much (see ``rebase(_:)``), in a way that keeps the order
/// however a crash interrupts it.
final class FileJobStore: Sendable {
    /// What a load found: the stored payloads in order.
    struct StoredFile {
        let name: String
        let path: String
        let data: Data
    }

    private struct State {
        var isOpen = false
        /// The number the next job stored last gets.
        var nextSequence: UInt64 = FileJobStore.middleSequence
        /// `nextSequence` is taken: a job file carries the highest number there is (a file this
        /// version did not write, or 2^64 jobs stored), so no job can be stored last.
        var sequencesUsedUp = false
        /// At most the lowest number in use (deletes do not raise it); `nil` while none is.
        var lowestSequence: UInt64?
        /// Job id -> file name.
        var index: [String: String] = [:]
        /// Job id -> older copies of the job that could not be removed (see
        /// ``persistFirst(_:readID:)``). `load()` ignores them, since the job's file comes first;
        /// `delete` removes them before the job's file.
        var staleCopies: [String: [String]] = [:]
        /// How many times a stored job's file was renamed or replaced by one of another name
        /// (``persistFirst(_:readID:)``, ``rebase(_:)``): `load()` reads again when it changed.
        var moves: UInt64 = 0
    }

    /// Where a new folder's numbers start: jobs stored last get this and above, jobs stored
    /// first the numbers below. Every number has 20 digits, so names sort as numbers do.
    static let middleSequence: UInt64 = 10_000_000_000_000_000_000

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
    /// id index and the next and lowest sequence numbers from the file names. Runs once;
    /// retried on the next call after a failure.
    ///
    /// A second file of an id already seen (a higher number) is an older copy that
    /// ``persistFirst(_:readID:)`` left behind when the process died after moving the job to
    /// the front and before removing the copy: it is removed, since `load()` would ignore it
    /// and it would come back once the job is deleted. It is kept in `staleCopies`, and removed
    /// with the job, when it cannot be removed or when the job's own file is damaged (then
    /// `load()` moves that file aside and the copy loads in its place).
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
        var staleCopies: [String: [String]] = [:]
        var removedCopies = false
        var highest: UInt64?
        var lowest: UInt64?
        // Fixed-width numbers: name order is sequence order, so an id's first file is its job.
        for name in names.sorted() {
            if name.hasPrefix(Self.temporaryPrefix) {
                try? DurableFile.remove(path(name))
                continue
            }
            guard let (sequence, parsedID) = Self.parse(fileName: name) else { continue }
            highest = max(highest ?? sequence, sequence)
            lowest = min(lowest ?? sequence, sequence)
            var id = parsedID
            if id == nil {
                // A long id, hashed in the name: read from the file. A file that cannot be read
                // fails the open (tried again at the next call): left out of the index, its job
                // could not be deleted or replaced in this process. One that reads but does not
                // decode is damaged: `load()` moves it aside.
                let data: Data
                do {
                    data = try DurableFile.read(path(name))
                } catch {
                    throw PersistenceError(
                        code: .readFailed,
                        message: "A job file could not be read while opening the queue folder; nothing was changed. Check its permissions (or the process's open files) and try again.",
                        path: path(name),
                        underlying: error
                    )
                }
                id = try? readID(data)
            }
            guard let id else { continue }
            guard let first = index[id] else {
                index[id] = name
                continue
            }
            // Removed only when the job's own file is intact: a damaged one is moved aside by
            // `load()`, and this copy then loads in its place.
            if let data = try? DurableFile.read(path(first)), (try? readID(data)) == id,
                (try? DurableFile.remove(path(name))) != nil {
                removedCopies = true
            } else {
                staleCopies[id, default: []].append(name)
            }
        }
        if removedCopies {
            // A failed flush is no error: a copy that comes back after a power loss goes again here.
            try? DurableFile.syncDirectory(directory)
        }
        state.index = index
        state.staleCopies = staleCopies
        // A file numbered 2^64 - 1 (not one this store wrote) leaves no number to store after it:
        // `persist` then throws instead of overflowing.
        let next = highest.map { $0.addingReportingOverflow(1) } ?? (partialValue: Self.middleSequence, overflow: false)
        state.nextSequence = next.overflow ? .max : next.partialValue
        state.sequencesUsedUp = next.overflow
        state.lowestSequence = lowest
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
            var usedUp = state.sequencesUsedUp
            var batchIndex: [String: String] = [:]
            for job in jobs {
                if let existing = batchIndex[job.id] ?? state.index[job.id] {
                    names.append((job.id, existing, false))
                } else {
                    guard !usedUp else {
                        throw PersistenceError(
                            code: .writeFailed,
                            message: "No job can be stored after the last one of this folder: a job file carries the highest "
                                + "number there is (\(UInt64.max)), so none of the \(jobs.count) job(s) was stored. "
                                + "Move that file away and open the folder again, or use another queue name.",
                            path: directory,
                            jobID: job.id
                        )
                    }
                    let name = Self.fileName(sequence: nextSequence, id: job.id)
                    let next = nextSequence.addingReportingOverflow(1)
                    if next.overflow { usedUp = true } else { nextSequence = next.partialValue }
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
            if state.lowestSequence == nil, nextSequence > state.nextSequence {
                state.lowestSequence = state.nextSequence
            }
            state.nextSequence = nextSequence
            state.sequencesUsedUp = usedUp
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

    /// Stores the batch before every stored job, all or nothing, as ``persist(_:readID:)``
    /// does: every job is written and flushed to a temporary file, then each is renamed to a
    /// number below the lowest in use (the batch's first job lowest) and the folder is flushed.
    /// An id listed twice is stored once, at its first place, with its last payload.
    ///
    /// A job already stored gets a new file at the front; its old file is removed only once
    /// the new one is flushed into the folder, so a crash in between leaves two files of the
    /// job (the first one loads, and opening the folder removes the other) and never none. An
    /// old file that cannot be removed is kept in ``State/staleCopies``: the call still
    /// succeeds, since the job is stored first, and the copy is removed with the job.
    ///
    /// When a write or a rename fails, the new files are removed again, every job stored
    /// before is untouched, and the call throws.
    func persistFirst(_ jobs: [(id: String, payload: Data)], readID: (Data) throws -> String) throws(PersistenceError) {
        try state.withLock { state throws(PersistenceError) in
            try openIfNeeded(&state, readID: readID)
            var order: [String] = []
            var payloads: [String: Data] = [:]
            for job in jobs {
                if payloads.updateValue(job.payload, forKey: job.id) == nil { order.append(job.id) }
            }
            guard !order.isEmpty else { return }
            let count = UInt64(order.count)
            if (state.lowestSequence ?? state.nextSequence) < count {
                try rebase(&state)
            }
            let lowest = state.lowestSequence ?? state.nextSequence
            guard lowest >= count else {
                throw PersistenceError(
                    code: .writeFailed,
                    message: "No room is left in the queue folder's numbering to store \(count) job(s) first; nothing "
                        + "was stored. Store fewer at once.",
                    path: directory
                )
            }
            let first = lowest - count
            let entries = order.enumerated().map { offset, id in
                (id: id, name: Self.fileName(sequence: first + UInt64(offset), id: id), old: state.index[id])
            }
            var written: [String] = []
            for entry in entries {
                let temporary = path(Self.temporaryPrefix + entry.name)
                do {
                    try DurableFile.remove(temporary)
                    try DurableFile.writeNewFile(payloads[entry.id] ?? Data(), to: temporary)
                    written.append(temporary)
                } catch {
                    for file in written { try? DurableFile.remove(file) }
                    throw PersistenceError(
                        code: .writeFailed,
                        message: "Job \(entry.id) could not be written, so none of the \(entries.count) job(s) was "
                            + "stored first; every job stored before is unchanged. Check free space and permissions.",
                        path: path(entry.name),
                        jobID: entry.id,
                        underlying: error
                    )
                }
            }
            // Numbers are used up even if a rename fails, so that a name is never reused.
            state.lowestSequence = first
            var renamed: [String] = []
            for entry in entries {
                do {
                    try DurableFile.rename(path(Self.temporaryPrefix + entry.name), to: path(entry.name))
                    renamed.append(entry.name)
                } catch {
                    for file in written { try? DurableFile.remove(file) }
                    for name in renamed { try? DurableFile.remove(path(name)) }
                    try? DurableFile.syncDirectory(directory)
                    throw PersistenceError(
                        code: .writeFailed,
                        message: "Job \(entry.id) could not be moved into place, so the jobs of this batch were removed "
                            + "again and every job stored before is unchanged; check the queue folder.",
                        path: path(entry.name),
                        jobID: entry.id,
                        underlying: error
                    )
                }
            }
            for entry in entries {
                state.index[entry.id] = entry.name
                if let old = entry.old { state.staleCopies[entry.id, default: []].append(old) }
            }
            if entries.contains(where: { $0.old != nil }) {
                state.moves &+= 1
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
            // The new files are on disk: the old ones of moved jobs can go.
            var removedAny = false
            for entry in entries {
                guard let old = entry.old, (try? DurableFile.remove(path(old))) != nil else { continue }
                state.staleCopies[entry.id]?.removeAll { $0 == old }
                if state.staleCopies[entry.id]?.isEmpty == true { state.staleCopies[entry.id] = nil }
                removedAny = true
            }
            if removedAny {
                // A failed flush is no error: a copy that comes back after a power loss comes
                // after the job's file, and opening the folder removes it.
                try? DurableFile.syncDirectory(directory)
            }
        }
    }

    /// Makes room below a folder numbered from 1 (written before ``persistFirst(_:readID:)``
    /// existed): every job file numbered below ``middleSequence`` is renamed to its number plus
    /// ``middleSequence``, the highest first, and the folder is flushed after each rename. The
    /// files already moved are always the highest ones and keep their order, so a crash or a
    /// power loss at any point leaves the jobs in the same order, and the next call carries on.
    private func rebase(_ state: inout State) throws(PersistenceError) {
        let names: [String]
        do {
            names = try DurableFile.list(directory)
        } catch {
            throw PersistenceError(
                code: .writeFailed,
                message: "The queue folder could not be listed to make room for jobs stored first; nothing was "
                    + "stored. Check its permissions.",
                path: directory,
                underlying: error
            )
        }
        let files = names.compactMap { name in Self.parse(fileName: name).map { (name: name, sequence: $0.sequence) } }
        let low = files.filter { $0.sequence < Self.middleSequence }.sorted { $0.sequence > $1.sequence }
        // A number too high to move (a file not written by this library) leaves no room below it.
        if let highest = low.first, highest.sequence.addingReportingOverflow(Self.middleSequence).overflow {
            throw PersistenceError(
                code: .writeFailed,
                message: "The job file \(highest.name) has a number too high to make room for jobs stored first; "
                    + "nothing was stored. Move the file out of the queue folder.",
                path: path(highest.name)
            )
        }
        if !low.isEmpty {
            state.moves &+= 1
        }
        // Jobs stored last from now on go after the moved files, even if a rename below fails.
        if state.nextSequence <= Self.middleSequence {
            state.nextSequence = max(low.first.map { $0.sequence &+ Self.middleSequence &+ 1 } ?? 0, Self.middleSequence)
        }
        var owner: [String: String] = [:]
        for (id, name) in state.index { owner[name] = id }
        for file in low {
            // The same name with the new 20-digit number.
            let number = Self.fileName(sequence: file.sequence + Self.middleSequence, id: "").prefix(20)
            let name = String(number) + file.name.dropFirst(20)
            do {
                try DurableFile.rename(path(file.name), to: path(name))
                try DurableFile.syncDirectory(directory)
            } catch {
                throw PersistenceError(
                    code: .writeFailed,
                    message: "The job file \(file.name) could not be renamed to make room for jobs stored first; nothing "
                        + "was stored and the order of the stored jobs is kept. Check the queue folder.",
                    path: path(file.name),
                    underlying: error
                )
            }
            if let id = owner[file.name] {
                if state.index[id] == file.name {
                    state.index[id] = name
                } else if let position = state.staleCopies[id]?.firstIndex(of: file.name) {
                    state.staleCopies[id]?[position] = name
                }
            } else {
                for (id, copies) in state.staleCopies {
                    if let position = copies.firstIndex(of: file.name) { state.staleCopies[id]?[position] = name }
                }
            }
        }
        // Every file is now numbered from `middleSequence` up.
        var numbers = files.map(\.sequence).filter { $0 >= Self.middleSequence }
        if let smallest = low.last { numbers.append(smallest.sequence + Self.middleSequence) }
        state.lowestSequence = numbers.min()
    }

    /// Removes the job's file and flushes the folder; an unknown id does nothing. Older copies
    /// of the job (``State/staleCopies``) are removed first: if one cannot be, the job's own
    /// file stays too, so that the copy never loads in the job's place.
    func delete(id: String, readID: (Data) throws -> String) throws(PersistenceError) {
        try state.withLock { state throws(PersistenceError) in
            try openIfNeeded(&state, readID: readID)
            guard let name = state.index[id] else { return }
            var current = name
            do {
                for copy in state.staleCopies[id] ?? [] {
                    current = copy
                    try DurableFile.remove(path(copy))
                    state.staleCopies[id]?.removeFirst()
                }
                state.staleCopies[id] = nil
                current = name
                try DurableFile.remove(path(name))
                try DurableFile.syncDirectory(directory)
            } catch {
                throw PersistenceError(
                    code: .deleteFailed,
                    message: "Job \(id) could not be deleted; check the folder's permissions.",
                    path: path(current),
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
            state.staleCopies = [:]
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
        // A job that `persistFirst` moves (or a renumbering renames) while the files are read
        // changes its file name: a pass that overlapped a move may miss it, so it is read again.
        // After three such passes the files' bytes are read under the lock (still classified
        // outside it), which no move can overlap.
        var pass: LoadPass<Job>?
        for _ in 0..<3 {
            let moves = state.withLock { $0.moves }
            let attempt = try readPass(names: try listJobFiles(), classify: classify) { name throws(PersistenceError) in
                try readJobFile(name)
            }
            if state.withLock({ $0.moves }) == moves {
                pass = attempt
                break
            }
        }
        if pass == nil {
            let contents = try state.withLock { _ throws(PersistenceError) -> [(name: String, data: Data?)] in
                var contents: [(name: String, data: Data?)] = []
                for name in try listJobFiles() { contents.append((name, try readJobFile(name))) }
                return contents
            }
            var byName: [String: Data] = [:]
            for file in contents { byName[file.name] = file.data }
            pass = try readPass(names: contents.map(\.name), classify: classify) { name throws(PersistenceError) in byName[name] }
        }
        guard let pass else { return ([], []) }
        let jobs = pass.jobs
        var issues = pass.issues
        let corrupt = pass.corrupt
        let duplicates = pass.duplicates
        for (name, kept) in duplicates {
            logger.warning("Duplicate job file ignored", metadata: ["file": "\(name)", "kept": "\(kept)"])
        }
        for (name, cause) in corrupt {
            let moved = state.withLock { state in
                let moved = quarantine(name, cause: cause)
                if let id = state.index.first(where: { $0.value == name })?.key {
                    // An older copy the job's file hid now loads in its place (this load
                    // returned it): it becomes the job's file, so that a delete removes it.
                    state.index[id] = state.staleCopies[id]?.first
                    if state.staleCopies[id] != nil {
                        state.staleCopies[id]?.removeFirst()
                        if state.staleCopies[id]?.isEmpty == true { state.staleCopies[id] = nil }
                    }
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

    /// What one reading of the folder found.
    private struct LoadPass<Job> {
        var jobs: [Job] = []
        var issues: [PersistenceError] = []
        var corrupt: [(name: String, cause: any Error)] = []
        var duplicates: [(name: String, kept: String)] = []
    }

    /// The folder's job file names, in load order.
    private func listJobFiles() throws(PersistenceError) -> [String] {
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
        return names.compactMap { name in Self.parse(fileName: name).map { (name, $0.sequence) } }
            .sorted { ($0.1, $0.0) < ($1.1, $1.0) }
            .map(\.0)
    }

    /// The bytes of a job file, or `nil` when it was deleted or moved since the folder was listed.
    private func readJobFile(_ name: String) throws(PersistenceError) -> Data? {
        do {
            return try DurableFile.read(path(name))
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
            return nil
        } catch {
            throw PersistenceError(
                code: .readFailed,
                message: "The job file \(name) could not be read; nothing was moved or deleted. Check the disk "
                    + "and the file's permissions, then load again.",
                path: path(name),
                underlying: error
            )
        }
    }

    /// Classifies the files `names`, in order, reading each with `read`.
    private func readPass<Job>(
        names: [String],
        classify: (Data) -> Found<Job>,
        read: (String) throws(PersistenceError) -> Data?
    ) throws(PersistenceError) -> LoadPass<Job> {
        var pass = LoadPass<Job>()
        pass.jobs.reserveCapacity(names.count)
        var seen: [String: String] = [:]
        for name in names {
            guard let data = try read(name) else { continue }
            switch classify(data) {
            case .job(let id, let job):
                if let previous = seen[id] {
                    // Two files for one id: an older copy that could not be removed (see
                    // `persistFirst`), or a foreign copy. The first is the job's file: keep it.
                    pass.duplicates.append((name, previous))
                    continue
                }
                seen[id] = name
                pass.jobs.append(job)
            case .undecodable(let id, let error):
                seen[id] = seen[id] ?? name
                pass.issues.append(
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
                pass.corrupt.append((name, error))
            }
        }
        return pass
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
