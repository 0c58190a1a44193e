import Foundation
import TaskBroker
#if canImport(TaskBrokerPostgres)
import TaskBrokerPostgres
#endif
import Testing

/// A database opened read-only (`Configuration.readOnly`, `PostgresConfiguration.readOnly`), as
/// `queuekit`'s commands that only look open it: it reads, refuses every write with a typed
/// error, and writes nothing, not even a migration.
@Suite(.timeLimit(.minutes(3)))
struct ReadOnlyTests {
    @Test(arguments: Backend.allCases) func aReadOnlyDatabaseReadsAndRefusesWrites(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        let database = try await store.open()
        try await database.save([TestAction(key: "a", queueName: "q"), TestAction(key: "b", queueName: "q")])
        try await database.pauseQueues(["q"])
        let readOnly = try await store.open(readOnly: true)
        let snapshot = try await readOnly.snapshot()
        #expect(snapshot.map(\.name) == ["q"] && snapshot.first?.pending == 2 && snapshot.first?.pausedByOperator == true)
        #expect(try await readOnly.lookup(key: "a", collection: "actions") != nil)
        await #expect { try await readOnly.save(TestAction(key: "c", queueName: "q")) } throws: { error in
            (error as? TaskBrokerError)?.code == .storageFailed
        }
        await #expect { try await readOnly.delete(key: "a", collection: "actions") } throws: { error in
            (error as? TaskBrokerError)?.code == .storageFailed
        }
        await #expect { try await readOnly.resumeQueues(["q"]) } throws: { error in
            (error as? TaskBrokerError)?.code == .storageFailed
        }
        let after = try await database.snapshot()
        #expect(after.first?.pending == 2 && after.first?.pausedByOperator == true, "nothing was written: \(after)")
    }

    /// Nothing to read yet: a read-only open neither creates the file nor the schema.
    @Test(arguments: Backend.allCases) func aReadOnlyOpenCreatesNothing(_ backend: Backend) async throws {
        let store = try TestStore(backend)
        await #expect { _ = try await store.open(readOnly: true) } throws: { error in
            let code = (error as? TaskBrokerError)?.code
            return code == (backend == .sqlite ? .databaseNotFound : .incompatibleSchema) && "\(error)".contains("read-only")
        }
        if backend == .sqlite {
            #expect(!FileManager.default.fileExists(atPath: store.path))
        }
        // Opened read-write once, it opens read-only after.
        _ = try await store.open()
        #expect(try await store.open(readOnly: true).snapshot().isEmpty)
    }
}
