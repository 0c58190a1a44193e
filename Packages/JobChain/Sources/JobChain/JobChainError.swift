/// The one error type that JobChain throws or reports.
///
/// Match on ``code``; ``message`` says what happened and what to do; ``underlying`` keeps
/// the cause when there is one.
public struct JobChainError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// A command named a custom queue tag that is not registered with `Job.addQueue(tag:priority:)`
        /// (never added, or removed with `Job.removeQueue(tag:)`).
        public static let unknownQueue = Code("unknownQueue")
        /// A command's `delay:` was negative, not a number, or too large to represent.
        public static let invalidDelay = Code("invalidDelay")
        /// Waiting for the job here could never end: the caller runs on the main queue and a
        /// command that must run on the main queue is still pending.
        public static let wouldDeadlock = Code("wouldDeadlock")
        /// The job did not come to rest within the time given to the wait.
        public static let timedOut = Code("timedOut")

        /// The code's name, for logs.
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

    /// The code and message (and the cause, when there is one).
    public var description: String {
        if let underlying {
            return "\(code): \(message) (\(underlying))"
        }
        return "\(code): \(message)"
    }
}
