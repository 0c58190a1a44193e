import Foundation

/// A compact binary `Codable` format for SQLite rows: decoding is several times faster than
/// JSON, which is what loading a million jobs in seconds needs.
///
/// Layout: a format byte (`0xB1`), then one value. A value is a tag byte and its content:
/// `0` nil, `1` false, `2` true, `3` signed integer (zigzag varint), `4` unsigned integer
/// (varint), `5` Double (8 bytes little-endian), `6` String (varint length + UTF-8), `7` Data
/// (varint length + bytes), `8` Date (Double seconds since 2001), `9` array (varint count +
/// values), `10` keyed map (varint count + (varint key length, key UTF-8, value) pairs).
enum BinaryJobCoder {
    static let formatByte: UInt8 = 0xB1

    enum Tag: UInt8 {
        case null = 0, isFalse, isTrue, int, uint, double, string, data, date, array, map
    }

    static func encode<T: Encodable>(_ value: T) throws -> Data {
        let root = Slot()
        try BinaryEncoder(slot: root, codingPath: []).encodeValue(value)
        // Refused now rather than stored and set aside as corrupt by the next load.
        guard fitsDepth(root.node) else {
            throw EncodingError.invalidValue(
                value,
                EncodingError.Context(
                    codingPath: [],
                    debugDescription: "Values nested more than \(maximumDepth) levels deep (arrays and keyed containers) cannot be stored"
                )
            )
        }
        var output: [UInt8] = [formatByte]
        output.reserveCapacity(128)
        write(root.node, into: &output)
        return Data(output)
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try decode(type, from: [UInt8](data))
    }

    /// The deepest nesting of arrays and maps a stored value may have. Deeper rows are
    /// refused as corrupt before anything recurses into them, and deeper values are not encoded.
    static let maximumDepth = 256

    /// Whether every value in `node` is nested less than ``maximumDepth`` levels deep (`depth`
    /// counts the levels above `node`), as ``validate(_:)`` requires of a stored value. Stops
    /// at the limit, so it recurses no deeper than that.
    static func fitsDepth(_ node: Node, depth: Int = 0) -> Bool {
        guard depth < maximumDepth else { return false }
        switch node {
        case .array(let array): return array.items.allSatisfy { fitsDepth($0.node, depth: depth + 1) }
        case .map(let map): return map.entries.allSatisfy { fitsDepth($0.1.node, depth: depth + 1) }
        default: return true
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try validate(bytes)
        return try BinaryDecoder(input: Input(bytes: bytes), offset: 1, codingPath: []).decodeValue(T.self)
    }

    /// Checks the framing of a stored value (format byte, tags, lengths, nesting depth, no
    /// trailing bytes) without decoding it: a failure here means the bytes are corrupt, while
    /// a failure of `decode` after it means the type does not match them.
    static func validate(_ bytes: [UInt8]) throws {
        guard bytes.first == formatByte else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "Not a QueuePersistence binary job"))
        }
        let input = Input(bytes: bytes)
        var end = 1
        try input.skip(&end)
        guard end == bytes.count else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "Trailing bytes after the job"))
        }
    }

    // MARK: - Writing

    static func writeVarint(_ value: UInt64, into output: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            output.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        output.append(UInt8(value))
    }

    static func writeBytes<C: Collection<UInt8>>(_ tag: Tag, _ bytes: C, into output: inout [UInt8]) {
        output.append(tag.rawValue)
        writeVarint(UInt64(bytes.count), into: &output)
        output.append(contentsOf: bytes)
    }

    static func writeDouble(_ tag: Tag, _ value: Double, into output: inout [UInt8]) {
        output.append(tag.rawValue)
        var bits = value.bitPattern.littleEndian
        withUnsafeBytes(of: &bits) { output.append(contentsOf: $0) }
    }

    static func write(_ node: Node, into output: inout [UInt8]) {
        switch node {
        case .null: output.append(Tag.null.rawValue)
        case .bool(let value): output.append(value ? Tag.isTrue.rawValue : Tag.isFalse.rawValue)
        case .int(let value):
            output.append(Tag.int.rawValue)
            writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)), into: &output)
        case .uint(let value):
            output.append(Tag.uint.rawValue)
            writeVarint(value, into: &output)
        case .double(let value): writeDouble(.double, value, into: &output)
        case .string(let value): writeBytes(.string, value.utf8, into: &output)
        case .data(let value): writeBytes(.data, value, into: &output)
        case .date(let value): writeDouble(.date, value, into: &output)
        case .array(let array):
            output.append(Tag.array.rawValue)
            writeVarint(UInt64(array.items.count), into: &output)
            for item in array.items { write(item.node, into: &output) }
        case .map(let map):
            output.append(Tag.map.rawValue)
            writeVarint(UInt64(map.entries.count), into: &output)
            for (key, slot) in map.entries {
                writeVarint(UInt64(key.utf8.count), into: &output)
                output.append(contentsOf: key.utf8)
                write(slot.node, into: &output)
            }
        }
    }
}
