public import Foundation
public import QueueCore

/// The seed's base job (`CuteJob` in its README), for the tests of every QueueKit package.
///
/// Its fields are the seed's; the initializer is added so that other modules can build one
/// with a chosen id. Equality compares every field, `createdDate` included, so a job that went
/// through a persister and back equals the original only if nothing was lost.
public struct CuteJob: QueueJob, Equatable {
    /// The job's id; a new UUID by default.
    public private(set) var id: String
    /// When the job was created; now by default.
    public private(set) var createdDate: Date
    /// The job's payload.
    public var data: Data?
    /// What the job does.
    public var action: String

    /// Creates a job.
    ///
    /// - Parameters:
    ///   - id: The id; a new UUID by default.
    ///   - createdDate: The creation date; now by default.
    ///   - data: The payload; none by default.
    ///   - action: What the job does; empty by default.
    public init(id: String = UUID().uuidString, createdDate: Date = Date(), data: Data? = nil, action: String = "") {
        self.id = id
        self.createdDate = createdDate
        self.data = data
        self.action = action
    }
}
