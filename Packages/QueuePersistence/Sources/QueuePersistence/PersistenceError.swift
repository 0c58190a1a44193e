/// The one error type that QueuePersistence throws or reports.
///
/// Match on ``code``; ``message`` says what happened and what to do; ``path`` names the file
/// or folder concerned, when there is one; ``underlying`` keeps the cause (a POSIX error,
/// a GRDB `DatabaseError`, a `DecodingError`).
public struct PersistenceError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// The folder that holds the jobs could not be determined or created.
        public static let storageUnavailable = Code("storageUnavailable")
        /// Writing a job to storage failed; the job is not stored.
        public static let writeFailed = Code("writeFailed")
        /// Deleting a job or clearing the store failed.
        public static let deleteFailed = Code("deleteFailed")
        /// Reading the stored jobs failed.
        public static let readFailed = Code("readFailed")
        /// A job could not be encoded for storage.
        public static let encodingFailed = Code("encodingFailed")
        /// A stored job's bytes are damaged: empty, truncated, badly framed, not the format.
        /// Both persisters set such bytes aside (``FileBasedPersister`` in its `corrupt/`
        /// folder, ``SQLiteJobPersister`` in its quarantine table) and load every other job.
        public static let corruptJob = Code("corruptJob")
        /// A stored job's bytes are intact, but the job type no longer decodes them (it gained
        /// a non-optional field, say). The job is left where it is, untouched, reported in
        /// `loadIssues` with its ``PersistenceError/jobID`` and the decoding error as
        /// ``PersistenceError/underlying``, and loads again once the type decodes it.
        public static let undecodableJob = Code("undecodableJob")
        /// The file is not a SQLite database, or the database is damaged.
        public static let corruptDatabase = Code("corruptDatabase")
        /// The database was written by a newer QueuePersistence whose schema this version
        /// does not know.
        public static let incompatibleSchema = Code("incompatibleSchema")
        /// There is no database file at the path, and the caller asked to open existing files
        /// only (``SQLiteDatabaseOptions/createsMissingFile`` is `false`).
        public static let databaseNotFound = Code("databaseNotFound")

        public var description: String { name }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What happened and what to do about it.
    public let message: String
    /// The file or folder concerned, if any.
    public let path: String?
    /// The id of the job concerned, when it is known (an undecodable job's, say).
    public let jobID: String?
    /// The error that caused this one, if any.
    public let underlying: (any Error)?

    /// Creates an error with a code, a message a user can act on, an optional path and cause.
    ///
    /// - Parameters:
    ///   - code: What kind of failure this is.
    ///   - message: What happened and what to do about it.
    ///   - path: The file or folder concerned, if any.
    ///   - jobID: The id of the job concerned, if known.
    ///   - underlying: The error that caused this one, if any.
    public init(code: Code, message: String, path: String? = nil, jobID: String? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.jobID = jobID
        self.underlying = underlying
    }

    public var description: String {
        if let underlying {
            return "\(code): \(message) (\(underlying))"
        }
        return "\(code): \(message)"
    }
}
