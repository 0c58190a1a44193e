import Foundation
import QueueCore

/// Encodes jobs as JSON (readable on disk, tolerant of added optional fields) and decodes
/// them back, turning every failure into a ``PersistenceError``.
enum JobCodec {
    private struct IDOnly: Decodable {
        let id: String
    }

    static func encode<Job: QueueJob>(_ job: Job) throws(PersistenceError) -> Data {
        do {
            return try JSONEncoder().encode(job)
        } catch {
            throw PersistenceError(
                code: .encodingFailed,
                message: "Job \(job.id) could not be encoded as JSON; check its Encodable conformance.",
                underlying: error
            )
        }
    }

    /// Encodes `job` in the compact binary format SQLite rows use.
    static func encodeBinary<Job: QueueJob>(_ job: Job) throws(PersistenceError) -> Data {
        do {
            return try BinaryJobCoder.encode(job)
        } catch {
            throw PersistenceError(
                code: .encodingFailed,
                message: "Job \(job.id) could not be encoded; check its Encodable conformance.",
                underlying: error
            )
        }
    }

    /// The `id` of a stored job, without decoding the rest.
    static func id(from data: Data) throws -> String {
        try JSONDecoder().decode(IDOnly.self, from: data).id
    }
}
