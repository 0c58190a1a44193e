import Foundation

// MARK: - Decoder (reads the bytes in place)

struct Input {
    let bytes: [UInt8]

    func corrupt(_ message: String, _ path: [any CodingKey] = []) -> DecodingError {
        .dataCorrupted(.init(codingPath: path, debugDescription: message))
    }

    func byte(_ offset: inout Int) throws -> UInt8 {
        guard offset < bytes.count else { throw corrupt("Unexpected end of the job's bytes") }
        defer { offset += 1 }
        return bytes[offset]
    }

    func varint(_ offset: inout Int) throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try byte(&offset)
            guard shift < 64 else { throw corrupt("Integer too long") }
            result |= UInt64(byte & 0x7f) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
    }

    func length(_ offset: inout Int) throws -> Int {
        let length = try varint(&offset)
        guard length <= UInt64(bytes.count - offset) else { throw corrupt("Length beyond the end of the job") }
        return Int(length)
    }

    func double(_ offset: inout Int) throws -> Double {
        guard bytes.count - offset >= 8 else { throw corrupt("Unexpected end of the job's bytes") }
        var bits: UInt64 = 0
        for index in 0..<8 { bits |= UInt64(bytes[offset + index]) << (8 * UInt64(index)) }
        offset += 8
        return Double(bitPattern: UInt64(littleEndian: bits))
    }

    /// Moves `offset` past one whole value, nested at most ``BinaryJobCoder/maximumDepth``
    /// arrays and maps deep (`depth` counts the levels above this value), so that a crafted
    /// row cannot overflow the stack of the thread that decodes it.
    func skip(_ offset: inout Int, depth: Int = 0) throws {
        guard depth < BinaryJobCoder.maximumDepth else {
            throw corrupt("Values nested more than \(BinaryJobCoder.maximumDepth) levels deep")
        }
        let raw = try byte(&offset)
        guard let tag = BinaryJobCoder.Tag(rawValue: raw) else { throw corrupt("Unknown value tag \(raw)") }
        switch tag {
        case .null, .isFalse, .isTrue: break
        case .int, .uint: _ = try varint(&offset)
        case .double, .date:
            guard bytes.count - offset >= 8 else { throw corrupt("Unexpected end of the job's bytes") }
            offset += 8
        case .string, .data: offset += try length(&offset)
        case .array:
            let count = try varint(&offset)
            for _ in 0..<count { try skip(&offset, depth: depth + 1) }
        case .map:
            let count = try varint(&offset)
            for _ in 0..<count {
                offset += try length(&offset)
                try skip(&offset, depth: depth + 1)
            }
        }
    }
}

/// A coding path built only when someone asks for it (errors, user code): decoding a field
/// must not allocate an array per field.
struct LazyPath {
    let parent: [any CodingKey]
    let key: (any CodingKey)?

    init(_ parent: [any CodingKey], _ key: (any CodingKey)? = nil) {
        self.parent = parent
        self.key = key
    }

    var path: [any CodingKey] {
        guard let key else { return parent }
        return parent + [key]
    }
}

struct BinaryDecoder: Decoder {
    let input: Input
    let offset: Int
    private let lazyPath: LazyPath
    var codingPath: [any CodingKey] { lazyPath.path }

    init(input: Input, offset: Int, codingPath: [any CodingKey]) {
        self.init(input: input, offset: offset, path: LazyPath(codingPath))
    }

    init(input: Input, offset: Int, path: LazyPath) {
        self.input = input
        self.offset = offset
        self.lazyPath = path
    }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == Data.self {
            var position = offset
            if let value = try SingleValueDecoder.data(input, &position, codingPath) as? T { return value }
        }
        if T.self == Date.self {
            var position = offset
            guard try input.byte(&position) == BinaryJobCoder.Tag.date.rawValue else {
                throw DecodingError.typeMismatch(Date.self, .init(codingPath: codingPath, debugDescription: "Expected a date"))
            }
            if let value = Date(timeIntervalSinceReferenceDate: try input.double(&position)) as? T { return value }
        }
        return try T(from: self)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(try KeyedDecoder<Key>(input: input, offset: offset, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try UnkeyedDecoder(input: input, offset: offset, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueDecoder(input: input, offset: offset, codingPath: codingPath)
    }
}

struct KeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let input: Input
    let codingPath: [any CodingKey]
    /// Where the map's first key starts, and how many entries it has.
    private let start: Int
    private let count: Int
    /// Key ranges and value offsets, for large maps only; small ones are scanned.
    private let entries: [(key: Range<Int>, offset: Int)]

    init(input: Input, offset: Int, codingPath: [any CodingKey]) throws {
        self.input = input
        self.codingPath = codingPath
        var position = offset
        guard try input.byte(&position) == BinaryJobCoder.Tag.map.rawValue else {
            throw DecodingError.typeMismatch(
                [String: Any].self,
                .init(codingPath: codingPath, debugDescription: "Expected a keyed container")
            )
        }
        let count = try input.varint(&position)
        guard count <= UInt64(input.bytes.count) else { throw input.corrupt("Map count too large", codingPath) }
        self.count = Int(count)
        self.start = position
        var entries: [(key: Range<Int>, offset: Int)] = []
        if count > 8 { entries.reserveCapacity(Int(count)) }
        for _ in 0..<count {
            let length = try input.length(&position)
            let key = position..<position + length
            position += length
            if count > 8 { entries.append((key, position)) }
            try input.skip(&position)
        }
        self.entries = entries
    }

    private func forEachEntry(_ body: (Range<Int>, Int) -> Bool) {
        if count > 8 {
            for entry in entries where !body(entry.key, entry.offset) { return }
            return
        }
        // Already validated by init, so the reads below cannot fail.
        var position = start
        for _ in 0..<count {
            guard let length = try? input.length(&position) else { return }
            let key = position..<position + length
            position += length
            if !body(key, position) { return }
            guard (try? input.skip(&position)) != nil else { return }
        }
    }

    var allKeys: [Key] {
        var keys: [Key] = []
        forEachEntry { range, _ in
            if let key = Key(stringValue: String(decoding: input.bytes[range], as: UTF8.self)) { keys.append(key) }
            return true
        }
        return keys
    }

    private func find(_ name: String) -> Int? {
        var found: Int?
        forEachEntry { range, offset in
            if name.utf8.elementsEqual(input.bytes[range]) {
                found = offset
                return false
            }
            return true
        }
        return found
    }

    func contains(_ key: Key) -> Bool {
        find(key.stringValue) != nil
    }

    private func offset(_ key: Key) throws -> Int {
        guard let offset = find(key.stringValue) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for \(key.stringValue)"))
        }
        return offset
    }

    private func single(_ key: Key) throws -> SingleValueDecoder {
        SingleValueDecoder(input: input, offset: try offset(key), path: LazyPath(codingPath, key))
    }

    func decodeNil(forKey key: Key) throws -> Bool { try single(key).decodeNil() }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try single(key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try single(key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try single(key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try single(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try single(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try single(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try single(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try single(key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try single(key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try single(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try single(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try single(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try single(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try single(key).decode(type) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try BinaryDecoder(input: input, offset: try offset(key), path: LazyPath(codingPath, key)).decodeValue(type)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type,
        forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try BinaryDecoder(input: input, offset: try offset(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try BinaryDecoder(input: input, offset: try offset(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        guard let offset = find("super") else {
            throw DecodingError.keyNotFound(SuperKey(), .init(codingPath: codingPath, debugDescription: "No super value"))
        }
        return BinaryDecoder(input: input, offset: offset, codingPath: codingPath + [SuperKey()])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        BinaryDecoder(input: input, offset: try offset(key), codingPath: codingPath + [key])
    }
}

struct UnkeyedDecoder: UnkeyedDecodingContainer {
    let input: Input
    let codingPath: [any CodingKey]
    let count: Int?
    private(set) var currentIndex = 0
    private var position: Int

    init(input: Input, offset: Int, codingPath: [any CodingKey]) throws {
        self.input = input
        self.codingPath = codingPath
        var position = offset
        guard try input.byte(&position) == BinaryJobCoder.Tag.array.rawValue else {
            throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "Expected an array"))
        }
        let count = try input.varint(&position)
        guard count <= UInt64(input.bytes.count) else { throw input.corrupt("Array count too large", codingPath) }
        self.count = Int(count)
        self.position = position
    }

    var isAtEnd: Bool { currentIndex >= (count ?? 0) }

    /// The offset of the next element, advancing past it.
    private mutating func next() throws -> (offset: Int, path: [any CodingKey]) {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self,
                .init(codingPath: codingPath + [IndexKey(currentIndex)], debugDescription: "The array has no more elements")
            )
        }
        let start = position
        try input.skip(&position)
        defer { currentIndex += 1 }
        return (start, codingPath + [IndexKey(currentIndex)])
    }

    private mutating func single() throws -> SingleValueDecoder {
        let (offset, path) = try next()
        return SingleValueDecoder(input: input, offset: offset, codingPath: path)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, input.bytes[position] == BinaryJobCoder.Tag.null.rawValue else { return false }
        _ = try next()
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try single().decode(type) }
    mutating func decode(_ type: String.Type) throws -> String { try single().decode(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try single().decode(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try single().decode(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try single().decode(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try single().decode(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try single().decode(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try single().decode(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try single().decode(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try single().decode(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try single().decode(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try single().decode(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try single().decode(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try single().decode(type) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (offset, path) = try next()
        return try BinaryDecoder(input: input, offset: offset, codingPath: path).decodeValue(type)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let (offset, path) = try next()
        return try BinaryDecoder(input: input, offset: offset, codingPath: path).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let (offset, path) = try next()
        return try BinaryDecoder(input: input, offset: offset, codingPath: path).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let (offset, path) = try next()
        return BinaryDecoder(input: input, offset: offset, codingPath: path)
    }
}

struct SingleValueDecoder: SingleValueDecodingContainer {
    let input: Input
    let offset: Int
    private let lazyPath: LazyPath
    var codingPath: [any CodingKey] { lazyPath.path }

    init(input: Input, offset: Int, codingPath: [any CodingKey]) {
        self.init(input: input, offset: offset, path: LazyPath(codingPath))
    }

    init(input: Input, offset: Int, path: LazyPath) {
        self.input = input
        self.offset = offset
        self.lazyPath = path
    }

    private func mismatch<T>(_ type: T.Type, _ tag: UInt8) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "Expected \(type), found value tag \(tag)"))
    }

    static func data(_ input: Input, _ position: inout Int, _ path: [any CodingKey]) throws -> Data {
        let tag = try input.byte(&position)
        guard tag == BinaryJobCoder.Tag.data.rawValue else {
            throw DecodingError.typeMismatch(Data.self, .init(codingPath: path, debugDescription: "Expected data, found tag \(tag)"))
        }
        let length = try input.length(&position)
        return Data(input.bytes[position..<position + length])
    }

    func decodeNil() -> Bool {
        offset < input.bytes.count && input.bytes[offset] == BinaryJobCoder.Tag.null.rawValue
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        var position = offset
        let tag = try input.byte(&position)
        switch tag {
        case BinaryJobCoder.Tag.isTrue.rawValue: return true
        case BinaryJobCoder.Tag.isFalse.rawValue: return false
        default: throw mismatch(type, tag)
        }
    }

    func decode(_ type: String.Type) throws -> String {
        var position = offset
        let tag = try input.byte(&position)
        guard tag == BinaryJobCoder.Tag.string.rawValue else { throw mismatch(type, tag) }
        let length = try input.length(&position)
        return String(decoding: input.bytes[position..<position + length], as: UTF8.self)
    }

    func decode(_ type: Double.Type) throws -> Double {
        var position = offset
        let tag = try input.byte(&position)
        switch tag {
        case BinaryJobCoder.Tag.double.rawValue: return try input.double(&position)
        case BinaryJobCoder.Tag.int.rawValue, BinaryJobCoder.Tag.uint.rawValue: return Double(try decode(Int64.self))
        default: throw mismatch(type, tag)
        }
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

    private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        var position = offset
        let tag = try input.byte(&position)
        guard tag == BinaryJobCoder.Tag.int.rawValue || tag == BinaryJobCoder.Tag.uint.rawValue else {
            throw mismatch(type, tag)
        }
        let raw = try input.varint(&position)
        let value: T?
        if tag == BinaryJobCoder.Tag.int.rawValue {
            value = T(exactly: Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))))
        } else {
            value = T(exactly: raw)
        }
        guard let value else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "The number does not fit \(type)"))
        }
        return value
    }

    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try BinaryDecoder(input: input, offset: offset, path: lazyPath).decodeValue(type)
    }
}
