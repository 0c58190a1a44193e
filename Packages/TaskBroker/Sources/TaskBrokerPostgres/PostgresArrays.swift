import NIOCore
import PostgresNIO

/// A one-dimensional array parameter without `NULL`s, written in PostgreSQL's binary array format
/// in one pass over its elements.
///
/// postgres-nio encodes a Swift array element by element through its generic path (reserve a
/// length, encode the value, write the length back). For the finish statement's nine arrays, one
/// entry each per outcome, building the statement took 0.58 µs per outcome that way and 0.41 µs
/// with this (200 outcomes a statement, measured alternately in one process). The format is the
/// same (`array_send`): dimensions (0 for an empty array), a has-nulls flag, the element type, then
/// for one dimension its length and lower bound (1), and each element as its byte count and bytes.
struct PostgresArray<Element: PostgresArrayElement>: PostgresNonThrowingEncodable, Sendable {
    let elements: [Element]

    init(_ elements: [Element]) {
        self.elements = elements
    }

    static var psqlType: PostgresDataType { Element.arrayType }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        buffer.writeInteger(elements.isEmpty ? 0 : 1, as: Int32.self)
        buffer.writeInteger(0, as: Int32.self)
        buffer.writeInteger(Element.elementType.rawValue)
        guard !elements.isEmpty else { return }
        // A parameter's length is an Int32 on the wire: no statement gets near 2^31 elements.
        buffer.writeInteger(Int32(truncatingIfNeeded: elements.count))
        buffer.writeInteger(1, as: Int32.self)
        for element in elements {
            element.writeElement(into: &buffer)
        }
    }
}

/// An element of a ``PostgresArray``: its types and how it writes itself (byte count, then bytes).
protocol PostgresArrayElement: Sendable {
    static var elementType: PostgresDataType { get }
    static var arrayType: PostgresDataType { get }
    func writeElement(into buffer: inout ByteBuffer)
}

extension PostgresArrayElement where Self: FixedWidthInteger {
    func writeElement(into buffer: inout ByteBuffer) {
        buffer.writeInteger(Int32(Self.bitWidth / 8))
        buffer.writeInteger(self)
    }
}

extension Int64: PostgresArrayElement {
    static var elementType: PostgresDataType { .int8 }
    static var arrayType: PostgresDataType { .int8Array }
}

extension Int32: PostgresArrayElement {
    static var elementType: PostgresDataType { .int4 }
    static var arrayType: PostgresDataType { .int4Array }
}

extension Int16: PostgresArrayElement {
    static var elementType: PostgresDataType { .int2 }
    static var arrayType: PostgresDataType { .int2Array }
}

extension Double: PostgresArrayElement {
    static var elementType: PostgresDataType { .float8 }
    static var arrayType: PostgresDataType { .float8Array }
    func writeElement(into buffer: inout ByteBuffer) {
        buffer.writeInteger(8, as: Int32.self)
        buffer.writeInteger(bitPattern)
    }
}

extension String: PostgresArrayElement {
    static var elementType: PostgresDataType { .text }
    static var arrayType: PostgresDataType { .textArray }
    func writeElement(into buffer: inout ByteBuffer) {
        // The UTF-8 byte count, then the bytes. Strings here are queue names, keys and collections,
        // far below 2^31 bytes (PostgreSQL refuses a text value over 1 GB anyway).
        let lengthIndex = buffer.writerIndex
        buffer.writeInteger(0, as: Int32.self)
        let written = buffer.writeString(self)
        buffer.setInteger(Int32(truncatingIfNeeded: written), at: lengthIndex)
    }
}
