import Foundation
import FuzzSupport
import QueueCoreTesting
@testable import QueuePersistence

// The contract of a row read by SQLiteJobPersister.load(): any bytes are a job, an intact row that
// the type does not decode, or damaged bytes, each with a DecodingError; never a crash, a hang or
// unbounded memory. Whatever decodes passes `validate` and survives a round trip. A richer type
// than CuteJob reaches every container and every integer width of the decoder.
@main
enum Main {
    static func main() { runLibFuzzer(fuzzBinaryRow) }
}

/// Checks one input (libFuzzer calls it by this C name when its own `main` runs the loop).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBinaryRow(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = inputBytes(start, count)
    switch SQLiteJobPersister<CuteJob>.outcome(bytes) {
    case .job(let job):
        check { try BinaryJobCoder.validate(bytes) }
        check {
            // Compared as bytes: a stored NaN date is kept bit for bit, but is not equal to itself
            // (the fuzzer's first finding was this check comparing with `==`).
            let encoded = try BinaryJobCoder.encode(job)
            let again = try BinaryJobCoder.encode(try BinaryJobCoder.decode(CuteJob.self, from: encoded))
            precondition(again == encoded, "round trip changed the job: \(job)")
        }
    case .undecodable(let error), .corrupt(let error):
        precondition(error is DecodingError, "untyped error: \(type(of: error)) \(error)")
    }
    do {
        let value = try BinaryJobCoder.decode(Rich.self, from: bytes)
        check { try BinaryJobCoder.validate(bytes) }
        check {
            // Compared as bytes: a Float NaN is not equal to itself.
            let encoded = try BinaryJobCoder.encode(value)
            let again = try BinaryJobCoder.encode(try BinaryJobCoder.decode(Rich.self, from: encoded))
            precondition(again == encoded, "round trip changed \(value)")
        }
    } catch {
        precondition(error is DecodingError, "untyped error: \(type(of: error)) \(error)")
    }
    return 0
}

/// Runs `body`, which must not throw: a value that decoded once must encode and decode again.
private func check(_ body: () throws -> Void) {
    do {
        try body()
    } catch {
        preconditionFailure("a decoded value failed its round trip: \(error)")
    }
}

private struct Rich: Codable {
    enum Kind: String, Codable { case one, two }
    var small: Int8
    var unsigned: UInt16?
    var wide: UInt64
    var ratio: Float
    var kind: Kind
    var when: Date
    var blob: Data
    var list: [Int32]
    var table: [String: [UInt8]]
    var children: [Rich]?
    var pair: Pair?
}

private struct Pair: Codable {
    var first: Int
    var second: String

    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        first = try container.decode(Int.self)
        second = try container.decode(String.self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(first)
        try container.encode(second)
    }
}
