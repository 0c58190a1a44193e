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

    static func decode<Job: QueueJob>(_ type: Job.Type, from data: Data, decoder: JSONDecoder = JSONDecoder()) throws(PersistenceError) -> Job {
        guard !data.isEmpty else {
            throw PersistenceError(code: .corruptJob, message: "The stored job is empty (0 bytes).")
        }
        do {
            return try decoder.decode(Job.self, from: data)
        } catch {
            throw PersistenceError(
                code: .corruptJob,
                message: "A stored job (\(data.count) bytes) is truncated or not a \(Job.self).",
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

    /// Decodes a job stored in the compact binary format.
    static func decodeBinary<Job: QueueJob>(_ type: Job.Type, from data: [UInt8]) throws(PersistenceError) -> Job {
        guard !data.isEmpty else {
            throw PersistenceError(code: .corruptJob, message: "The stored job is empty (0 bytes).")
        }
        do {
            return try BinaryJobCoder.decode(Job.self, from: data)
        } catch {
            throw PersistenceError(
                code: .corruptJob,
                message: "A stored job (\(data.count) bytes) is truncated or not a \(Job.self).",
                underlying: error
            )
        }
    }

    /// The `id` of a stored job, without decoding the rest.
    static func id(from data: Data) throws -> String {
        try JSONDecoder().decode(IDOnly.self, from: data).id
    }
}
