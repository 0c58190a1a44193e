import Foundation
import PropertyBased
@testable import QueuePersistence
import QueueCoreTesting
import Testing

/// The coders of what the persisters store, for random values: SQLite rows (the binary coder),
/// job files (JSON) and job file names. A failing case prints its input and a seed to replay it
/// with `.fixedSeed(…)`.
@Suite(.timeLimit(.minutes(1)))
struct CoderPropertyTests {
    /// Any Unicode text (control characters, `/`, `_`, emoji, …) of up to 12, 40 and 120 scalars.
    static let shortText = Gen.uint32(in: 0...0x10FFFF).array(of: 0...12).map(Self.string)
    static let mediumText = Gen.uint32(in: 0...0x10FFFF).array(of: 0...40).map(Self.string)
    static let longText = Gen.uint32(in: 0...0x10FFFF).array(of: 0...120).map(Self.string)

    @Sendable static func string(_ codes: [UInt32]) -> String {
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: codes.compactMap(Unicode.Scalar.init))
        return String(scalars)
    }

    /// Finite doubles of any magnitude: the sign, a mantissa and a binary exponent.
    static let finite = zip(Gen.double(in: -1...1), Gen.int(in: -1_000...1_000)).map { mantissa, exponent in
        Double(sign: mantissa < 0 ? .minus : .plus, exponent: exponent, significand: abs(mantissa))
    }

    struct Sample: Codable, Equatable {
        var small: Int8
        var unsigned: UInt16?
        var wide: UInt64
        var ratio: Double
        var text: String
        var blob: Data
        var list: [Int32]
        var table: [String: Int]
        var when: Date
        var children: [Sample]
    }

    static let leaf = zip(
        Gen.int8(in: .min ... .max), Gen.uint16(in: .min ... .max), Gen.bool, Gen.uint64(in: .min ... .max),
        finite, shortText, Gen.uint8(in: .min ... .max).array(of: 0...40), Gen.int32(in: .min ... .max).array(of: 0...8)
    ).map { small, unsigned, hasUnsigned, wide, ratio, text, blob, list in
        Sample(
            small: small, unsigned: hasUnsigned ? unsigned : nil, wide: wide, ratio: ratio, text: text,
            blob: Data(blob), list: list, table: Dictionary(list.map { ("\($0)", Int($0) * 3) }, uniquingKeysWith: max),
            when: Date(timeIntervalSinceReferenceDate: ratio), children: []
        )
    }

    @Test func binaryRowsRoundTripAnyValue() async throws {
        await propertyCheck(count: 300, input: Self.leaf, Self.leaf.array(of: 0...4)) { root, children in
            var value = root
            value.children = children
            let encoded = try BinaryJobCoder.encode(value)
            try BinaryJobCoder.validate(Array(encoded))
            #expect(try BinaryJobCoder.decode(Sample.self, from: encoded) == value)
        }
    }

    @Test func binaryRowsCutShortAreATypedErrorNeverACrash() async throws {
        await propertyCheck(count: 300, input: Self.leaf, Gen.double(in: 0..<1)) { value, cut in
            let encoded = try BinaryJobCoder.encode(value)
            let prefix = Array(encoded.prefix(Int(Double(encoded.count) * cut)))
            #expect(throws: DecodingError.self) { try BinaryJobCoder.decode(Sample.self, from: prefix) }
        }
    }

    @Test func jobFilesRoundTripAnyJob() async throws {
        await propertyCheck(
            count: 300, input: Self.mediumText, Self.finite, Gen.uint8(in: .min ... .max).array(of: 0...64), Self.shortText
        ) { id, seconds, bytes, action in
            let job = CuteJob(id: id, createdDate: Date(timeIntervalSinceReferenceDate: seconds), data: bytes.isEmpty ? nil : Data(bytes), action: action)
            let file = try JobCodec.encode(job)
            guard case .job(let storedID, let again) = FileBasedPersister<CuteJob>.classify(file, decoder: JSONDecoder()) else {
                Issue.record("a job file written for \(job) does not read back as a job")
                return
            }
            #expect(storedID == id)
            #expect(again == job)
        }
    }

    @Test func jobFileNamesParseBackAndFitEveryFileSystem() async {
        await propertyCheck(count: 500, input: Gen.uint64(in: .min ... .max), Self.longText) { sequence, id in
            let name = FileJobStore.fileName(sequence: sequence, id: id)
            #expect(name.utf8.count <= 255, "longer than a file name may be")
            #expect(!name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0))
            #expect(!name.hasPrefix(FileJobStore.temporaryPrefix))
            let parsed = FileJobStore.parse(fileName: name)
            #expect(parsed?.sequence == sequence)
            // A long id is replaced by its hash (the file holds the id): parsed as no id.
            #expect(parsed?.id == id || (parsed?.id == nil && name.contains("=")))
        }
    }
}
