import Foundation

/// A stored payload as JSON: whatever the application's action type, shown as it is stored.
/// A payload that is not JSON is shown as a string of its bytes.
enum JSONValue: Codable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(_ payload: Data) {
        self = (try? JSONDecoder().decode(JSONValue.self, from: payload)) ?? .string(String(decoding: payload, as: UTF8.self))
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The payload as one line of JSON with sorted keys (its bytes as text if it is not JSON).
    static func compactText(_ payload: Data) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: payload),
              let data = try? encoder.encode(value) else { return String(decoding: payload, as: UTF8.self) }
        return String(decoding: data, as: UTF8.self)
    }
}
