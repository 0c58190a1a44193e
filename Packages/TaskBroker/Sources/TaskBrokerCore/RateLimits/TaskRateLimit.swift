public import Foundation

/// A limit on how many actions start per period, for the queues whose names begin with a prefix
/// (``TaskQueueBroker/Configuration/rateLimits``).
///
/// The count is kept in the database: every broker of every process that has the same limit
/// shares it (on PostgreSQL, by the server's clock). At most ``starts`` actions start in any
/// window of ``period``: a sliding window, not one reset at fixed times. Queues outside the
/// prefix are not held back, and a queue waiting for the next free start holds no slot of its
/// broker; the broker waits for it with a timer.
public struct TaskRateLimit: Sendable, Hashable {
    /// Whose starts one count covers.
    public enum Scope: Sendable, Hashable {
        /// All the queues of the prefix together: at most ``TaskRateLimit/starts`` per period for
        /// the prefix (10 e-mails a second for `mail-`).
        case shared
        /// Each queue of the prefix on its own: at most ``TaskRateLimit/starts`` per period for
        /// every queue (one request a second per customer's `api-CUSTOMER` queue).
        case eachQueue
    }

    /// The queue-name prefix the limit covers (`""`: every queue of the broker).
    public let prefix: String
    /// How many actions may start in any window of ``period``.
    public let starts: Int
    /// The window.
    public let period: Duration
    /// Whether the queues of the prefix share one count or each has its own.
    public let scope: Scope

    /// Creates a limit.
    ///
    /// - Parameters:
    ///   - prefix: The queue-name prefix it covers.
    ///   - starts: At least 1.
    ///   - period: More than zero (a window of at least a millisecond).
    ///   - scope: ``Scope/shared`` (the default) or ``Scope/eachQueue``.
    /// - Throws: ``TaskBrokerError`` with code `.invalidArgument` for a count under 1 or a period
    ///   under a millisecond.
    public init(prefix: String, starts: Int, per period: Duration, scope: Scope = .shared) throws {
        guard starts >= 1 else {
            throw TaskBrokerError(
                code: .invalidArgument,
                message: "The rate limit for \"\(prefix)\" allows \(starts) starts; it must allow at least 1."
            )
        }
        guard period >= .milliseconds(1) else {
            throw TaskBrokerError(
                code: .invalidArgument,
                message: "The rate limit for \"\(prefix)\" has a period of \(period); it must be at least a millisecond."
            )
        }
        self.prefix = prefix.normalizedName
        self.starts = starts
        self.period = period
        self.scope = scope
    }

    /// How long after its window's oldest start leaves it a broker asks again for a full bucket:
    /// a twentieth of the period, at most 50 ms. Starts granted together leave the window
    /// together, one period after their grant; a start follows its grant by a few milliseconds
    /// that vary, and starts granted at the first instant allowed, a period after others that
    /// followed their grant a little later, would share a window of starts *as they happen* with
    /// them. The margin keeps them apart, for a twentieth of the throughput at most.
    var margin: Duration {
        min(period / 20, .milliseconds(50))
    }

    /// The key under which storage counts the starts of `queueName`.
    func bucket(for queueName: String) -> String {
        switch scope {
        case .shared: "prefix:\(prefix)"
        case .eachQueue: "queue:\(queueName)"
        }
    }
}

/// What ``TaskStorage/acquireStarts(bucket:limit:period:count:now:)`` granted.
public struct TaskRateGrant: Sendable, Hashable {
    /// How many starts were recorded (at most the count asked for).
    public var granted: Int
    /// When fewer were granted than asked: how long until the oldest start in the window leaves
    /// it (the next start may be granted then).
    public var retryAfter: Duration?
    /// When the starts were recorded (the server's clock on PostgreSQL): what
    /// ``TaskStorage/releaseStarts(bucket:at:count:)`` names to give them back.
    public var at: Date

    /// Creates a grant (for storage backends).
    ///
    /// - Parameters:
    ///   - granted: How many starts were recorded.
    ///   - retryAfter: When the window is full, how long until a start is free.
    ///   - at: When they were recorded.
    public init(granted: Int, retryAfter: Duration?, at: Date) {
        self.granted = granted
        self.retryAfter = retryAfter
        self.at = at
    }
}
