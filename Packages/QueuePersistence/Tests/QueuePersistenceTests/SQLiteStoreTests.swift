import Foundation
import GRDB
import QueuePersistence
import Testing
import QueueCoreTesting

@Suite(.timeLimit(.minutes(1)))
struct SQLiteStoreTests {
    private static func schema(_ migrations: [String] = ["demo-v1"]) -> SQLiteSchema {
        var migrator = DatabaseMigrator()
        for (index, identifier) in migrations.enumerated() {
            migrator.registerMigration(identifier) { db in
                try db.execute(sql: "CREATE TABLE demo\(index) (id TEXT PRIMARY KEY)")
            }
        }
        return SQLiteSchema(owner: "Demo", migrator: migrator, migrationPrefix: "demo-", version: migrations.count)
    }

    private static func writerPragma(_ name: String, _ store: SQLiteStore) throws -> String? {
        try store.pool.writeWithoutTransaction { db in try String.fetchOne(db, sql: "PRAGMA \(name)") }
    }

    @Test(arguments: [
        (SQLiteDatabaseOptions.Synchronous.full, "2"), (.normal, "1"), (.off, "0"),
    ])
    func writerRunsInWALWithTheChosenSynchronousLevel(level: SQLiteDatabaseOptions.Synchronous, pragma: String) throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteStore(
            path: directory.file("a.sqlite").path, options: .init(synchronous: level), schema: Self.schema()
        )
        #expect(try Self.writerPragma("journal_mode", store) == "wal")
        // GRDB sets NORMAL when it enables WAL; the store's level must win on the writer.
        #expect(try Self.writerPragma("synchronous", store) == pragma)
        #expect(try Self.writerPragma("busy_timeout", store) == "5000")
    }

    @Test(arguments: [
        (Duration.seconds(1_000_000_000_000), "2147483647"), (.seconds(-5), "0"), (.milliseconds(250), "250"),
    ])
    func anyBusyTimeoutIsClampedToWhatSQLiteTakes(timeout: Duration, pragma: String) throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteStore(
            path: directory.file("a.sqlite").path, options: .init(busyTimeout: timeout), schema: Self.schema()
        )
        #expect(try Self.writerPragma("busy_timeout", store) == pragma)
        // Also when set after the options were made (it is a `var`): opening such a store trapped.
        var options = SQLiteDatabaseOptions()
        options.busyTimeout = timeout
        let other = try SQLiteStore(path: directory.file("b.sqlite").path, options: options, schema: Self.schema())
        #expect(try Self.writerPragma("busy_timeout", other) == pragma)
    }

    @Test func migrationsRunOnceAndTheTablesExist() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.sqlite").path
        do {
            let store = try SQLiteStore(path: path, schema: Self.schema())
            try store.pool.write { db in try db.execute(sql: "INSERT INTO demo0 VALUES ('kept')") }
        }
        let reopened = try SQLiteStore(path: path, schema: Self.schema(["demo-v1", "demo-v2"]))
        #expect(try reopened.pool.read { db in try String.fetchAll(db, sql: "SELECT id FROM demo0") } == ["kept"])
        #expect(try reopened.pool.read { db in try db.tableExists("demo1") })
    }

    @Test func aFileWithAnUnknownMigrationOfTheSchemaIsRefused() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.sqlite").path
        _ = try SQLiteStore(path: path, schema: Self.schema(["demo-v1", "demo-v2"]))
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            _ = try SQLiteStore(path: path, schema: Self.schema(["demo-v1"]))
        }
        #expect(error?.code == .incompatibleSchema)
        #expect(error?.message.contains("newer Demo") == true)
    }

    @Test func migrationsOfOtherLibrariesInTheSameFileAreIgnored() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.sqlite").path
        var other = DatabaseMigrator()
        other.registerMigration("other-v1") { db in try db.execute(sql: "CREATE TABLE other (id INTEGER)") }
        _ = try SQLiteStore(
            path: path, schema: SQLiteSchema(owner: "Other", migrator: other, migrationPrefix: "other-", version: 1)
        )
        let store = try SQLiteStore(path: path, schema: Self.schema())
        #expect(try store.pool.read { db in try db.tableExists("demo0") && db.tableExists("other") })
    }

    @Test func aRecordedVersionAboveTheSchemaIsRefused() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.sqlite").path
        var schema = Self.schema()
        schema.recordedVersion = { _ in 7 }
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            _ = try SQLiteStore(path: path, schema: schema)
        }
        #expect(error?.code == .incompatibleSchema)
        #expect(error?.message.contains("schema version 7") == true)
    }

    @Test func aMissingFileIsCreatedByDefaultAndRefusedWhenAskedToOpenExistingOnly() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("missing.sqlite").path
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            _ = try SQLiteStore(path: path, options: .init(createsMissingFile: false), schema: Self.schema())
        }
        #expect(error?.code == .databaseNotFound)
        #expect(!FileManager.default.fileExists(atPath: path))
        _ = try SQLiteStore(path: path, schema: Self.schema())
        #expect(FileManager.default.fileExists(atPath: path))
        _ = try SQLiteStore(path: path, options: .init(createsMissingFile: false), schema: Self.schema())
    }

    /// Read-only: the rows are read, a write fails, nothing is migrated, and the file's bytes do not change.
    @Test func aReadOnlyOpenReadsAndWritesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.sqlite").path
        do {
            let store = try SQLiteStore(path: path, schema: Self.schema())
            try store.pool.write { db in try db.execute(sql: "INSERT INTO demo0 VALUES ('kept')") }
            try store.pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        var options = SQLiteDatabaseOptions()
        options.readOnly = true
        let store = try SQLiteStore(path: path, options: options, schema: Self.schema())
        #expect(try store.pool.read { db in try String.fetchAll(db, sql: "SELECT id FROM demo0") } == ["kept"])
        #expect(throws: (any Error).self) {
            try store.pool.write { db in try db.execute(sql: "INSERT INTO demo0 VALUES ('no')") }
        }
        // A newer schema with a migration to run: refused, not migrated.
        let older = #expect(throws: QueuePersistence.PersistenceError.self) {
            _ = try SQLiteStore(path: path, options: options, schema: Self.schema(["demo-v1", "demo-v2"]))
        }
        #expect(older?.code == .incompatibleSchema)
        #expect(older?.message.contains("read-only") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
        // A missing file is not created.
        let missing = directory.file("missing.sqlite").path
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            _ = try SQLiteStore(path: missing, options: options, schema: Self.schema())
        }
        #expect(error?.code == .databaseNotFound)
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    @Test func aMissingFolderIsAnErrorUnlessTheStoreMayCreateIt() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("sub/folder/a.sqlite").path
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            _ = try SQLiteStore(path: path, schema: Self.schema())
        }
        #expect(error?.code == .storageUnavailable)
        #expect(error?.message.contains("does not exist") == true)
        _ = try SQLiteStore(path: path, options: .init(createsDirectory: true), schema: Self.schema())
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test func aFileThatIsNotADatabaseSaysSo() throws {
        let directory = try TemporaryDirectory()
        let url = directory.file("garbage.sqlite")
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }).write(to: url)
        let error = #expect(throws: QueuePersistence.PersistenceError.self) {
            _ = try SQLiteStore(path: url.path, schema: Self.schema())
        }
        #expect(error?.code == .corruptDatabase)
        #expect(error?.message.contains("is not a QueueKit SQLite database or is corrupt") == true)
        #expect(error?.message.contains("writable") == false)
        #expect((error?.underlying as? DatabaseError)?.resultCode == .SQLITE_NOTADB)
    }

    @Test func translateMapsOperationsToCodes() throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("a.sqlite").path, schema: Self.schema())
        let failure = DatabaseError(resultCode: .SQLITE_IOERR, message: "disk I/O error")
        #expect(store.translate(failure, during: .write).code == .writeFailed)
        #expect(store.translate(failure, during: .read).code == .readFailed)
        #expect(store.translate(failure, during: .open).code == .storageUnavailable)
        #expect(store.translate(DatabaseError(resultCode: .SQLITE_CORRUPT), during: .read).code == .corruptDatabase)
    }
}
