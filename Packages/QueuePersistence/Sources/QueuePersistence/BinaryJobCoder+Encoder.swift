import Foundation

// MARK: - Encoder (builds a tree, then writes it)

/// An encoded value under construction; maps and arrays are shared references so that
/// containers handed out earlier keep writing into the same place.
enum Node {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case data(Data)
    case date(Double)
    case array(ArrayNode)
    case map(MapNode)
}

final class Slot {
    var node: Node = .null
}

final class ArrayNode {
    var items: [Slot] = []
}

final class MapNode {
    var entries: [(String, Slot)] = []

    func slot(for key: String) -> Slot {
        if let existing = entries.first(where: { $0.0 == key }) { return existing.1 }
        let slot = Slot()
        entries.append((key, slot))
        return slot
    }
}

struct IndexKey: CodingKey {
    var stringValue: String { "Index \(intValue ?? 0)" }
    var intValue: Int?
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

struct SuperKey: CodingKey {
    var stringValue: String { "super" }
    var intValue: Int? { nil }
    init() {}
    init?(stringValue: String) {}
    init?(intValue: Int) { nil }
}

struct BinaryEncoder: Encoder {
    let slot: Slot
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func encodeValue<T: Encodable>(_ value: T) throws {
        switch value {
        case let data as Data: slot.node = .data(data)
        case let date as Date: slot.node = .date(date.timeIntervalSinceReferenceDate)
        default: try value.encode(to: self)
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let map: MapNode
        if case .map(let existing) = slot.node {
            map = existing
        } else {
            map = MapNode()
            slot.node = .map(map)
        }
        return KeyedEncodingContainer(KeyedEncoder<Key>(map: map, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: ArrayNode
        if case .array(let existing) = slot.node {
            array = existing
        } else {
            array = ArrayNode()
            slot.node = .array(array)
        }
        return UnkeyedEncoder(array: array, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueEncoder(slot: slot, codingPath: codingPath)
    }
}

func node<T: BinaryInteger>(forInteger value: T) -> Node {
    if T.isSigned { return .int(Int64(value)) }
    return .uint(UInt64(value))
}

struct KeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let map: MapNode
    let codingPath: [any CodingKey]

    private func set(_ node: Node, _ key: Key) { map.slot(for: key.stringValue).node = node }

    mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(.double(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(.double(Double(value)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(.uint(UInt64(value)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(.uint(UInt64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(.uint(UInt64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(.uint(UInt64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(.uint(value), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try BinaryEncoder(slot: map.slot(for: key.stringValue), codingPath: codingPath + [key]).encodeValue(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type,
        forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        BinaryEncoder(slot: map.slot(for: key.stringValue), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        BinaryEncoder(slot: map.slot(for: key.stringValue), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        BinaryEncoder(slot: map.slot(for: "super"), codingPath: codingPath + [SuperKey()])
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        BinaryEncoder(slot: map.slot(for: key.stringValue), codingPath: codingPath + [key])
    }
}

struct UnkeyedEncoder: UnkeyedEncodingContainer {
    let array: ArrayNode
    let codingPath: [any CodingKey]
    var count: Int { array.items.count }

    private func nextSlot() -> Slot {
        let slot = Slot()
        array.items.append(slot)
        return slot
    }

    private func append(_ node: Node) { nextSlot().node = node }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(.double(value)) }
    mutating func encode(_ value: Float) throws { append(.double(Double(value))) }
    mutating func encode(_ value: Int) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { append(.int(value)) }
    mutating func encode(_ value: UInt) throws { append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { append(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { append(.uint(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let path = codingPath + [IndexKey(count)]
        try BinaryEncoder(slot: nextSlot(), codingPath: path).encodeValue(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = codingPath + [IndexKey(count)]
        return BinaryEncoder(slot: nextSlot(), codingPath: path).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = codingPath + [IndexKey(count)]
        return BinaryEncoder(slot: nextSlot(), codingPath: path).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let path = codingPath + [IndexKey(count)]
        return BinaryEncoder(slot: nextSlot(), codingPath: path)
    }
}

struct SingleValueEncoder: SingleValueEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { slot.node = .null }
    mutating func encode(_ value: Bool) throws { slot.node = .bool(value) }
    mutating func encode(_ value: String) throws { slot.node = .string(value) }
    mutating func encode(_ value: Double) throws { slot.node = .double(value) }
    mutating func encode(_ value: Float) throws { slot.node = .double(Double(value)) }
    mutating func encode(_ value: Int) throws { slot.node = node(forInteger: value) }
    mutating func encode(_ value: Int8) throws { slot.node = node(forInteger: value) }
    mutating func encode(_ value: Int16) throws { slot.node = node(forInteger: value) }
    mutating func encode(_ value: Int32) throws { slot.node = node(forInteger: value) }
    mutating func encode(_ value: Int64) throws { slot.node = node(forInteger: value) }
    mutating func encode(_ value: UInt) throws { slot.node = node(forInteger: value) }
    mutating func encode(_ value: UInt8) throws { slot.node = node(forInteger: value) }
    mutating func encode(_ value: UInt16) throws { slot.node = node(forInteger: value) }
    mutating func encode(_ value: UInt32) throws { slot.node = node(forInteger: value) }
    mutating func encode(_ value: UInt64) throws { slot.node = node(forInteger: value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try BinaryEncoder(slot: slot, codingPath: codingPath).encodeValue(value)
    }
}
