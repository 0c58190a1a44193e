public import Foundation

/// A unit of work that a ``JobQueue`` holds, persists and hands to its processor.
///
/// Conform a `Codable` struct; the seed's base job compiles unchanged:
///
/// ```swift
/// struct CuteJob: QueueJob {
///     private(set) var id: String = UUID().uuidString
///     private(set) var createdDate = Date()
///     var data: Data?
///     var action: String = ""
/// }
/// ```
public protocol QueueJob: Codable, Sendable {
    /// The job's unique id: ``JobQueue/cancel(id:)`` and persisters find the job by it.
    var id: String { get }
    /// When the job was created.
    var createdDate: Date { get }
    /// The payload the processor works on, if any.
    var data: Data? { get }
    /// What the processor should do with ``data``; the meaning is up to your domain.
    var action: String { get }
}
