/// The one error type that AsyncPrimitives throws.
///
/// Match on ``code`` to tell failures apart; ``message`` says what happened and what to do.
public struct AsyncPrimitivesError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// A future result was not filled within the interval given to `timeoutAfter(interval:)`.
        public static let timedOut = Code("timedOut")
        /// An index path named a section or row that an object data source does not have.
        public static let indexOutOfRange = Code("indexOutOfRange")

        /// The code's name, such as `timedOut`.
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

    /// The code and the message, followed by the underlying error when there is one.
    public var description: String {
        if let underlying {
            return "\(code): \(message) (\(underlying))"
        }
        return "\(code): \(message)"
    }
}
