/// The one error type that TaskBroker throws.
///
/// Match on ``code``; ``message`` says what happened and what to do; ``underlying`` keeps
/// the cause (a GRDB error, an encoding error).
public struct TaskBrokerError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// The database could not be opened, read or written.
        public static let storageFailed = Code("storageFailed")
        /// The database file was written by a newer TaskBroker whose schema this version does not know.
        public static let incompatibleSchema = Code("incompatibleSchema")
        /// Another broker of this process already claims a queue (or a name) this broker would claim.
        public static let queueAlreadyClaimed = Code("queueAlreadyClaimed")
        /// An action could not be encoded for storage.
        public static let encodingFailed = Code("encodingFailed")
        /// A broker name or queue name is empty or otherwise unusable.
        public static let invalidName = Code("invalidName")
        /// The operation needs a backend feature this `TaskDatabase` does not have.
        public static let unsupported = Code("unsupported")
        /// The file is not a QueueKit SQLite database, or it is corrupt.
        public static let corruptDatabase = Code("corruptDatabase")
        /// There is no database file at the path, and the configuration opens existing files only
        /// (`TaskDatabase.Configuration.createsMissingFile` is `false`).
        public static let databaseNotFound = Code("databaseNotFound")

        /// The database server could not be reached or refused the connection (a wrong password,
        /// an unreachable host, a missing database); the message names the host and what to check.
        public static let connectionFailed = Code("connectionFailed")
        /// A configuration value (a database URL, a schema name) is not usable.
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// A value passed to a call is not usable (a not-before time that is no time).
        public static let invalidArgument = Code("invalidArgument")

        public var description: String { name }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What happened and what to do about it.
    public let message: String
    /// The error that caused this one, if any.
    public let underlying: (any Error)?

    /// Creates an error with a code, a message a user can act on and an optional cause.
    ///
    /// - Parameters:
    ///   - code: What kind of failure this is.
    ///   - message: What happened and what to do about it.
    ///   - underlying: The error that caused this one, if any.
    public init(code: Code, message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String {
        if let underlying {
            return "\(code): \(message) (\(underlying))"
        }
        return "\(code): \(message)"
    }
}
