import Foundation
import FuzzSupport
import GRDB
@testable import TaskBrokerCore
@testable import TaskBrokerSQLite

// The contract of a row of `taskbroker_action` read by the SQLite backend: SQLite keeps any value in
// any column of an ordinary table, so any thirteen values (NULL, integer, real, text or blob each) are a
// StoredTask or a TaskBrokerError, never a crash. The payload of a task that reads is then decoded
// as the handler's action type the way the broker does, which must not crash either.
//
// Input: for each of the thirteen columns, a type byte (its value modulo 5) and a length byte, then
// that many content bytes.
@main
enum Main {
    static func main() { runLibFuzzer(fuzzTaskRow) }
}

/// Checks one input (libFuzzer calls it by this C name when its own `main` runs the loop).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTaskRow(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = inputBytes(start, count)[...]
    var values: [DatabaseValue] = []
    // The 14 columns of `SQLiteTaskStorage.selectedColumns` (the last: the trace context).
    for _ in 0..<14 {
        values.append(value(from: &input))
    }
    do {
        try database.read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?", arguments: StatementArguments(values)) else {
                preconditionFailure("SELECT returned no row")
            }
            do {
                let task = try SQLiteTaskStorage.task(from: row)
                let entries = BrokerEntry.decode([task, task], as: SampleAction.self, since: .zero)
                precondition(entries.count == 2, "decode lost an entry")
            } catch let error as TaskBrokerError {
                precondition(error.code == .corruptDatabase, "unexpected code \(error.code)")
            } catch {
                preconditionFailure("untyped error: \(type(of: error)) \(error)")
            }
        }
    } catch {
        preconditionFailure("the in-memory database failed: \(error)")
    }
    return 0
}

/// One in-memory database for every run.
private let database: DatabaseQueue = {
    do {
        return try DatabaseQueue()
    } catch {
        preconditionFailure("no in-memory database: \(error)")
    }
}()

private func value(from input: inout ArraySlice<UInt8>) -> DatabaseValue {
    guard let kind = input.popFirst() else { return .null }
    let length = Int(input.popFirst() ?? 0)
    let content = Array(input.prefix(length))
    input = input.dropFirst(length)
    switch kind % 5 {
    case 0: return .null
    case 1:
        var integer: Int64 = 0
        for byte in content.prefix(8) { integer = integer << 8 | Int64(byte) }
        return integer.databaseValue
    case 2:
        var bits: UInt64 = 0
        for byte in content.prefix(8) { bits = bits << 8 | UInt64(byte) }
        return Double(bitPattern: bits).databaseValue
    case 3: return String(decoding: content, as: UTF8.self).databaseValue
    default: return Data(content).databaseValue
    }
}

/// An action as a handler declares it.
private struct SampleAction: TaskQueueAction {
    var key: String
    var collection: String
    var queueName: String
    var step: Int
    var note: String?
}
