/// What happened to the jobs an observer of a ``JobQueue`` is told about.
///
/// Exactly the seed's five cases, so the seed's exhaustive `switch` compiles.
public enum JobQueueEvent: Sendable, Hashable, CustomStringConvertible {
    /// The jobs were added to the queue (by `add(_:)`, or put back at the front by `retry(_:)`).
    case added
    /// The jobs left the queue: by `remove()`, by `drain()`, or because the queue handed them
    /// to its processor.
    case removed
    /// The jobs were cancelled with `cancel(id:)` before they were processed.
    case cancelled
    /// The processor finished the jobs successfully.
    case processed
    /// The processor reported an error for the jobs; the retry strategy has already decided
    /// what happens to them when observers hear of it.
    case failedToProcess

    /// The case's name, as written in Swift (`"failedToProcess"`).
    public var description: String {
        switch self {
        case .added: "added"
        case .removed: "removed"
        case .cancelled: "cancelled"
        case .processed: "processed"
        case .failedToProcess: "failedToProcess"
        }
    }
}

/// One event of a ``JobQueue`` and the jobs it concerns, as ``JobQueue/events`` delivers it.
public struct JobQueueNotification<Job: QueueJob>: Sendable {
    /// What happened.
    public let event: JobQueueEvent
    /// The jobs it happened to, in queue order.
    public let jobs: [Job]

    /// Creates a notification.
    ///
    /// - Parameters:
    ///   - event: What happened.
    ///   - jobs: The jobs it happened to.
    public init(event: JobQueueEvent, jobs: [Job]) {
        self.event = event
        self.jobs = jobs
    }
}

/// Where a ``JobQueue`` is in its life: whether it hands jobs to its processor.
public enum JobQueueState: Sendable, Hashable, CustomStringConvertible {
    /// `start()` was called; the queue is about to look for work.
    case starting
    /// Started, and waiting for jobs: nothing is queued or nothing can be processed.
    case listening
    /// Started, and a job is with the processor or about to be.
    case processing
    /// `stop()` was called while jobs were with the processor; no new job is handed out.
    case stopping
    /// Not handing out jobs. A new queue starts here.
    case stopped

    /// The case's name, as written in Swift (`"listening"`).
    public var description: String {
        switch self {
        case .starting: "starting"
        case .listening: "listening"
        case .processing: "processing"
        case .stopping: "stopping"
        case .stopped: "stopped"
        }
    }
}
