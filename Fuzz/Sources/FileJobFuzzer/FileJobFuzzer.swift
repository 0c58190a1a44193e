import Foundation
import FuzzSupport
import QueueCoreTesting
@testable import QueuePersistence

// The contract of a job file read by FileBasedPersister.load(): any bytes are a job, an intact
// job that the type does not decode, or damaged bytes, each with a DecodingError; never a crash.
// A job that decodes is named by its own id, which the folder's index reads from the same bytes,
// and survives a round trip. Any name of a
// file in the queue folder parses to a sequence and id, or to nothing, and a parsed name is
// written back to the same name.
@main
enum Main {
    static func main() { runLibFuzzer(fuzzFileJob) }
}

/// Checks one input (libFuzzer calls it by this C name when its own `main` runs the loop).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFileJob(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let data = Data(inputBytes(start, count))
    let decoder = JSONDecoder()
    switch FileBasedPersister<CuteJob>.classify(data, decoder: decoder) {
    case .job(let id, let job):
        precondition(id == job.id, "the id classified (\(id)) is not the job's (\(job.id))")
        let indexed = try? FileBasedPersister<CuteJob>.id(from: data)
        precondition(indexed == job.id, "the id the index reads (\(indexed ?? "none")) is not the job's (\(job.id))")
        do {
            let encoded = try JobCodec.encode(job)
            guard case .job(_, let again) = FileBasedPersister<CuteJob>.classify(encoded, decoder: decoder) else {
                preconditionFailure("a decoded job does not decode after encoding: \(job)")
            }
            precondition(again == job, "round trip changed the job: \(job) -> \(again)")
        } catch {
            preconditionFailure("a decoded job does not encode: \(error)")
        }
    case .undecodable(_, let error), .corrupt(let error):
        precondition(error is DecodingError, "untyped error: \(type(of: error)) \(error)")
    }
    let name = String(decoding: data, as: UTF8.self)
    if let (sequence, id) = FileJobStore.parse(fileName: name), let id {
        let written = FileJobStore.fileName(sequence: sequence, id: id)
        guard let parsed = FileJobStore.parse(fileName: written) else {
            preconditionFailure("the name written for \(sequence)/\(id) does not parse: \(written)")
        }
        precondition(parsed.sequence == sequence, "sequence changed: \(name) -> \(written)")
        precondition(parsed.id == nil || parsed.id == id, "id changed: \(name) -> \(written)")
    }
    return 0
}
