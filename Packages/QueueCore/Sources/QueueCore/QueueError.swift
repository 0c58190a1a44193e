/// The one error type that QueueCore throws or reports.
///
/// Match on ``code``; ``message`` says what happened and what to do; ``underlying`` keeps
/// the cause (a persister's own error, say).
public struct QueueError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// The queue's persister failed to store, delete or load jobs.
        public static let persistenceFailed = Code("persistenceFailed")

        public var description: String { name }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What happened and what to do about it.
    public let message: String
    /// The error that caused this one, if any.
    public let underlying: (any Error)?

    /// Creates an error with a code, a message a user can act on and an optional cause.
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
