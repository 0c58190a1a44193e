// PostgreSQL only: not compiled in a build without TaskBrokerPostgres (the AddressSanitizer run).
#if canImport(TaskBrokerPostgres)
import Foundation
import NIOCore
import PostgresNIO
import TaskBroker
@testable import TaskBrokerPostgres
import Testing

/// The finish statement's array parameters are written by `PostgresArray`, not by postgres-nio's
/// element-by-element encoding: the same bytes, and the server reads back what was sent.
@Suite(.timeLimit(.minutes(3)))
struct PostgresArrayTests {
    @Test func arraysAreWrittenAsPostgresNIOWritesThem() {
        func bytes(_ encode: (inout ByteBuffer) -> Void) -> ByteBuffer {
            var buffer = ByteBuffer()
            encode(&buffer)
            return buffer
        }
        let int64s: [Int64] = [0, -1, 1, .min, .max, 1_234_567_890_123]
        let int32s: [Int32] = [0, -1, .min, .max]
        let int16s: [Int16] = [0, 3, .min, .max]
        let doubles: [Double] = [0, -0.5, 1_767_225_600.25, .greatestFiniteMagnitude]
        let strings = ["", "q", "queue/é/日本", String(repeating: "x", count: 3_000)]
        #expect(bytes { PostgresArray(int64s).encode(into: &$0, context: .default) } == bytes { int64s.encode(into: &$0, context: .default) })
        #expect(bytes { PostgresArray(int32s).encode(into: &$0, context: .default) } == bytes { int32s.encode(into: &$0, context: .default) })
        #expect(bytes { PostgresArray(int16s).encode(into: &$0, context: .default) } == bytes { int16s.encode(into: &$0, context: .default) })
        #expect(bytes { PostgresArray(doubles).encode(into: &$0, context: .default) } == bytes { doubles.encode(into: &$0, context: .default) })
        #expect(bytes { PostgresArray(strings).encode(into: &$0, context: .default) } == bytes { strings.encode(into: &$0, context: .default) })
        let empty: [Int64] = []
        #expect(bytes { PostgresArray(empty).encode(into: &$0, context: .default) } == bytes { empty.encode(into: &$0, context: .default) })
        #expect(PostgresArray<Int64>.psqlType == [Int64].psqlType)
        #expect(PostgresArray<String>.psqlType == [String].psqlType)
        #expect(PostgresArray<Double>.psqlType == [Double].psqlType)
    }

    @Test func theServerReadsBackWhatWasSent() async throws {
        let store = try TestStore(.postgres)
        let database = try await store.open()
        let int64s: [Int64] = [.min, -1, 0, .max]
        let int32s: [Int32] = [.min, 7]
        let int16s: [Int16] = [.max, -3]
        let doubles: [Double] = [1_767_225_600.25, -0.5]
        let strings = ["queue/é/日本", "", "a,b\"c"]
        let row = try await database.write { tx -> ([Int64], [Int32], [Int16], [Double], [String], Int) in
            let query: PostgresQuery = """
                SELECT \(PostgresArray(int64s))::int8[], \(PostgresArray(int32s))::int4[], \(PostgresArray(int16s))::int2[],
                       \(PostgresArray(doubles))::float8[], \(PostgresArray(strings))::text[], cardinality(\(PostgresArray([Int64]()))::int8[])
                """
            for try await row in try await tx.query(query).decode(([Int64], [Int32], [Int16], [Double], [String], Int).self) {
                return row
            }
            throw TaskBrokerError(code: .storageFailed, message: "no row")
        }
        #expect(row.0 == int64s)
        #expect(row.1 == int32s)
        #expect(row.2 == int16s)
        #expect(row.3 == doubles)
        #expect(row.4 == strings)
        #expect(row.5 == 0)
    }
}
#endif
