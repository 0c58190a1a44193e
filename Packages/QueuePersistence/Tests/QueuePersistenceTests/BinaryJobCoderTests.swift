import Foundation
@testable import QueuePersistence
import Testing
import QueueCoreTesting

/// A job with every shape Codable can produce, for the SQLite rows' binary format.
private struct RichJob: Codable, Equatable {
    enum Kind: String, Codable { case create, update }
    enum Payload: Codable, Equatable {
        case none
        case text(String)
        case pair(Int, label: String)
    }
    struct Nested: Codable, Equatable {
        var values: [Int64]
        var table: [String: Double]
        var matrix: [[UInt8]]
    }

    var id: String
    var createdDate: Date
    var data: Data?
    var optionalNil: String?
    var flags: [Bool]
    var small: Int8
    var big: UInt64
    var negative: Int
    var ratio: Float
    var kind: Kind
    var payloads: [Payload]
    var nested: Nested
    var url: URL
    var dates: [Date]
}

@Suite(.timeLimit(.minutes(1)))
struct BinaryJobCoderTests {
    private static let sample = RichJob(
        id: "ünï-😀",
        createdDate: Date(timeIntervalSinceReferenceDate: 123_456_789.987654321),
        data: Data((0...255).map { UInt8($0) }),
        optionalNil: nil,
        flags: [true, false, true],
        small: -128,
        big: .max,
        negative: .min,
        ratio: 0.1,
        kind: .update,
        payloads: [.none, .text("t"), .pair(-7, label: "l")],
        nested: .init(values: [0, -1, .max, .min], table: ["a": 1.5, "b": -.infinity], matrix: [[], [1, 2]]),
        url: URL(string: "https://example.com/a?b=c")!,
        dates: [Date(timeIntervalSince1970: 0), Date(timeIntervalSinceReferenceDate: -0.5)]
    )

    @Test func everyCodableShapeRoundTripsExactly() throws {
        let data = try BinaryJobCoder.encode(Self.sample)
        #expect(try BinaryJobCoder.decode(RichJob.self, from: data) == Self.sample)
    }

    @Test func everyTruncationOfAJobIsAnErrorNotACrash() throws {
        let data = try BinaryJobCoder.encode(Self.sample)
        for length in 0..<data.count {
            #expect(throws: (any Error).self, "length \(length)") {
                _ = try BinaryJobCoder.decode(RichJob.self, from: data.prefix(length))
            }
        }
    }

    @Test func randomBytesAreAnErrorNotACrash() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let length = Int.random(in: 1...64, using: &generator)
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            bytes[0] = BinaryJobCoder.formatByte
            #expect(throws: (any Error).self) {
                _ = try BinaryJobCoder.decode(RichJob.self, from: Data(bytes))
            }
        }
    }

    @Test func aJobIsSmallerThanItsJSON() throws {
        let job = CuteJob(id: UUID().uuidString, data: Data(repeating: 1, count: 100), action: "create")
        #expect(try BinaryJobCoder.encode(job).count < JSONEncoder().encode(job).count)
    }
}
