import Foundation

/// The broker's side of its rate limits: which limit governs a queue, the starts granted and
/// not yet used, and the queues waiting for one (a value the state machine keeps).
///
/// A queue whose head is about to run (claimed, on a shared backend) but that has no start
/// granted waits here instead of running:
/// - *asking*: a request for starts is under way for its bucket; the head stays in flight and
///   keeps its slot meanwhile (one storage round trip), and runs as soon as it is granted one;
/// - *parked*: its bucket is full; the queue gives its slot back, and goes back to the ready
///   line when the bucket's timer fires (the oldest start leaves the window).
struct RateGate {
    struct Bucket {
        let limit: TaskRateLimit
        /// Starts granted and not yet used: spent by the launch they were granted for.
        var granted = 0
        /// When storage recorded them (what a start given back names).
        var grantedAt = Date(timeIntervalSince1970: 0)
        /// Queues whose heads keep their slots while starts are asked for, in order.
        var asking: [String] = []
        /// How many of `asking` the request under way covers (0: none under way).
        var requested = 0
        /// Queues waiting for the bucket's timer, in order.
        var parked: [String] = []
        /// The timer that ends the wait for a full bucket (or for a failed request's retry).
        var timer: UInt64?
        /// Consecutive failed requests, for the backoff.
        var failures = 0
    }

    /// The limits, longest prefix first: a queue is governed by the longest prefix it has.
    let limits: [TaskRateLimit]
    private(set) var buckets: [String: Bucket] = [:]
    /// Every queue asking or parked.
    private(set) var waiting: Set<String> = []

    init(limits: [TaskRateLimit]) {
        self.limits = limits.sorted { $0.prefix.count > $1.prefix.count }
    }

    var isEmpty: Bool { limits.isEmpty }

    /// The bucket and limit that govern a queue; `nil` when no limit does.
    func bucket(for queueName: String) -> (key: String, limit: TaskRateLimit)? {
        guard !limits.isEmpty, let limit = limits.first(where: { queueName.hasPrefix($0.prefix) }) else { return nil }
        return (limit.bucket(for: queueName), limit)
    }

    /// Spends a granted start of the bucket, if there is one; returns when storage recorded it.
    mutating func spend(_ key: String) -> Date? {
        guard let bucket = buckets[key], bucket.granted > 0 else { return nil }
        buckets[key]?.granted = bucket.granted - 1
        return bucket.grantedAt
    }

    /// A head without a start waits: asking (it keeps its slot: `true`) unless its bucket is full.
    mutating func wait(_ queueName: String, for key: String, limit: TaskRateLimit) -> Bool {
        waiting.insert(queueName)
        var bucket = buckets[key] ?? Bucket(limit: limit)
        defer { buckets[key] = bucket }
        if bucket.timer != nil {
            bucket.parked.append(queueName)
            return false
        }
        bucket.asking.append(queueName)
        return true
    }

    /// The requests to send: for each bucket with queues asking and no request under way, how
    /// many starts to ask for.
    mutating func requests() -> [(key: String, limit: TaskRateLimit, count: Int)] {
        var requests: [(String, TaskRateLimit, Int)] = []
        for (key, bucket) in buckets where bucket.requested == 0 && !bucket.asking.isEmpty {
            buckets[key]?.requested = bucket.asking.count
            requests.append((key, bucket.limit, bucket.asking.count))
        }
        return requests.sorted { $0.0 < $1.0 }
    }

    /// A request's answer: the first `granted` queues it covered may start (they get a start
    /// each); the others, and any that asked meanwhile while the bucket is now full, park.
    /// - Returns: The queues that start now, and those that park (give their slots back), in order.
    mutating func answered(_ key: String, granted: Int, at: Date) -> (start: [String], park: [String]) {
        guard var bucket = buckets[key], bucket.requested > 0 else { return ([], []) }
        defer { buckets[key] = bucket }
        let covered = Array(bucket.asking.prefix(bucket.requested))
        bucket.asking.removeFirst(covered.count)
        bucket.requested = 0
        bucket.failures = 0
        let starting = Array(covered.prefix(granted))
        bucket.granted += starting.count
        bucket.grantedAt = at
        var parking: [String] = []
        if starting.count < covered.count {
            // Full: the rest wait for the timer, and so do those that asked meanwhile.
            parking = Array(covered.dropFirst(starting.count)) + bucket.asking
            bucket.parked += parking
            bucket.asking = []
        }
        for queueName in starting { waiting.remove(queueName) }
        return (starting, parking)
    }

    /// A request failed: every queue asking parks until the retry timer.
    /// - Returns: The queues that park (give their slots back), and the failures in a row so far.
    mutating func failed(_ key: String) -> (release: [String], failures: Int) {
        guard var bucket = buckets[key], bucket.requested > 0 else { return ([], 0) }
        defer { buckets[key] = bucket }
        let released = bucket.asking
        bucket.parked += released
        bucket.asking = []
        bucket.requested = 0
        bucket.failures += 1
        return (released, bucket.failures)
    }

    /// Whether the bucket has queues parked and no timer yet.
    func needsTimer(_ key: String) -> Bool {
        guard let bucket = buckets[key] else { return false }
        return bucket.timer == nil && !bucket.parked.isEmpty
    }

    mutating func setTimer(_ key: String, _ token: UInt64) {
        buckets[key]?.timer = token
    }

    /// The bucket's timer fired: its parked queues go back to the ready line (returned in order).
    mutating func timerFired(_ key: String, token: UInt64) -> [String] {
        guard var bucket = buckets[key], bucket.timer == token else { return [] }
        let parked = bucket.parked
        bucket.parked = []
        bucket.timer = nil
        for queueName in parked { waiting.remove(queueName) }
        if bucket.asking.isEmpty, bucket.requested == 0, bucket.granted == 0 {
            buckets[key] = nil
        } else {
            buckets[key] = bucket
        }
        return parked
    }

    /// Starts granted and not used by the launch they were granted for are given back: kept, one
    /// used later would start outside the window storage counted it in. Buckets with nothing
    /// left to do are dropped (a limit per queue would otherwise keep one per queue name ever seen).
    /// - Returns: The starts to give back to storage.
    mutating func takeUnusedGrants() -> [(key: String, at: Date, count: Int)] {
        var unused: [(String, Date, Int)] = []
        for (key, bucket) in buckets {
            if bucket.granted > 0 { unused.append((key, bucket.grantedAt, bucket.granted)) }
            if bucket.asking.isEmpty, bucket.requested == 0, bucket.parked.isEmpty, bucket.timer == nil {
                buckets[key] = nil
            } else if bucket.granted > 0 {
                buckets[key]?.granted = 0
            }
        }
        return unused.sorted { $0.0 < $1.0 }
    }
}
