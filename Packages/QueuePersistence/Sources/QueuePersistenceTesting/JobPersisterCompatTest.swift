import Dispatch
public import Foundation
public import QueueCore
import Synchronization

/// A job with every field a persister must keep, for ``JobPersisterCompatTest``.
public struct CompatTestJob: QueueJob, Hashable {
    /// The job's id.
    public var id: String
    /// When the job was created.
    public var createdDate: Date
    /// The payload.
    public var data: Data?
    /// The action.
    public var action: String

    /// Creates a job.
    /// - Parameters:
    ///   - id: The job's id.
    ///   - createdDate: When the job was created; a fixed date by default, so that dates tie.
    ///   - data: The payload.
    ///   - action: The action.
    public init(
        id: String,
        createdDate: Date = Date(timeIntervalSinceReferenceDate: 800_000_000.123456),
        data: Data? = nil,
        action: String = "upload"
    ) {
        self.id = id
        self.createdDate = createdDate
        self.data = data
        self.action = action
    }
}

/// A failed check of ``JobPersisterCompatTest``: which check, and what went wrong.
public struct JobPersisterCompatFailure: Error, Sendable, CustomStringConvertible {
    /// The check that failed.
    public let check: JobPersisterCompatTest.Check
    /// What was expected and what happened.
    public let message: String

    /// Creates a failure.
    /// - Parameters:
    ///   - check: The check that failed.
    ///   - message: What was expected and what happened.
    public init(check: JobPersisterCompatTest.Check, message: String) {
        self.check = check
        self.message = message
    }

    public var description: String { "\(check): \(message)" }
}

/// The behaviour every `JobPersister` must have, as one reusable suite.
///
/// Give it a factory that opens a persister on a named store: calling the factory twice with
/// the same name must open the same stored jobs (as a restarted process would), and different
/// names must be independent stores (for example, different queue names in one folder or one
/// database file). A persister that relies on the protocol's default `persistFirst(_:)` fails
/// the `persistFirst…` checks: the default stores the jobs last. Then run every check from a
/// test:
///
/// ```swift
/// @Test(arguments: JobPersisterCompatTest.Check.allCases)
/// func sqliteConforms(_ check: JobPersisterCompatTest.Check) async throws {
///     let path = temporaryDirectory + "/jobs.sqlite"
///     try await JobPersisterCompatTest { name in
///         try SQLiteJobPersister(handling: CompatTestJob.self, queueName: name, path: path)
///     }.run(check)
/// }
/// ```
public struct JobPersisterCompatTest: Sendable {
    /// Opens a persister on the store called `storeName`.
    public typealias Factory = @Sendable (_ storeName: String) throws -> any JobPersister<CompatTestJob>

    /// One behaviour the suite checks.
    public enum Check: String, CaseIterable, Sendable, CustomStringConvertible {
        /// A new store loads no job.
        case emptyStoreLoadsNothing
        /// Persisting an empty array stores nothing and does not fail.
        case persistingNothingStoresNothing
        /// Jobs load in the order they were persisted, even when their dates tie.
        case loadReturnsJobsInPersistOrder
        /// Jobs persisted through one persister load through a new one on the same store.
        case jobsSurviveReopening
        /// Deleting a job removes that job only, also after reopening.
        case deleteRemovesOnlyThatJob
        /// Deleting a job that is not stored does nothing.
        case deletingAnUnknownJobDoesNothing
        /// Persisting a stored id replaces the job and keeps its place.
        case persistingAStoredIDReplacesItInPlace
        /// Jobs persisted after deletes and a reopen still go after every stored job.
        case newJobsGoLastAfterDeletesAndReopening
        /// `clear` removes every job, reports no error, and the store stays usable.
        case clearRemovesEveryJob
        /// Two stores never see each other's jobs.
        case storesAreIsolated
        /// Ids, dates, payloads and actions come back exactly as persisted.
        case fieldsRoundTripExactly
        /// Concurrent `persist` calls from many threads all land, once each, in each thread's order.
        case concurrentPersistsAllLandOnce
        /// `persistFirst` stores its jobs, in order, before every stored job, interleaved with
        /// `persist`, across a reopen, and without touching another store; storing no job does nothing.
        case persistFirstStoresBeforeEveryStoredJob
        /// `persistFirst` of a stored id replaces the job and moves it to the front; an id listed
        /// twice is stored once, at its first place, with its last value.
        case persistFirstMovesAStoredIDToTheFront
        /// After deletes and a reopen, `persistFirst` still goes before and `persist` after every stored job.
        case persistFirstAfterDeletesAndReopening

        public var description: String { rawValue }
    }

    private let makePersister: Factory

    /// Creates the suite for one kind of persister.
    /// - Parameter makePersister: Opens a persister on a named store (see the type's summary).
    public init(makePersister: @escaping Factory) {
        self.makePersister = makePersister
    }

    /// Runs every check and reports every failure at once.
    /// - Throws: The first ``JobPersisterCompatFailure``, or the error a persister threw,
    ///   after every check has run.
    public func runAll() async throws {
        var failures: [any Error] = []
        for check in Check.allCases {
            do {
                try await run(check)
            } catch {
                failures.append(error)
            }
        }
        if let first = failures.first {
            if failures.count == 1 { throw first }
            throw JobPersisterCompatFailure(
                check: (first as? JobPersisterCompatFailure)?.check ?? .emptyStoreLoadsNothing,
                message: "\(failures.count) checks failed: " + failures.map { "\($0)" }.joined(separator: "; ")
            )
        }
    }

    /// Runs one check on a fresh store.
    /// - Parameter check: The behaviour to check.
    /// - Throws: ``JobPersisterCompatFailure`` describing what differed, or the error a
    ///   persister threw.
    public func run(_ check: Check) async throws {
        let store = "\(check.rawValue)-\(UUID().uuidString)"
        let open = { try makePersister(store) }
        func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
            if !condition { throw JobPersisterCompatFailure(check: check, message: message()) }
        }
        func expectJobs(_ persister: any JobPersister<CompatTestJob>, _ expected: [CompatTestJob], _ context: String) throws {
            let loaded = try persister.load()
            try expect(
                loaded == expected,
                "\(context): expected ids \(expected.map(\.id)), loaded \(loaded.map(\.id))"
                    + (loaded.map(\.id) == expected.map(\.id) ? " (same ids, different fields)" : "")
            )
        }
        let jobs = (0..<12).map { CompatTestJob(id: "job-\(($0 * 7) % 12)-\($0)", data: Data("payload \($0)".utf8)) }

        switch check {
        case .emptyStoreLoadsNothing:
            try expectJobs(try open(), [], "a new store")

        case .persistingNothingStoresNothing:
            let persister = try open()
            try persister.persist([])
            try expectJobs(persister, [], "after persist([])")

        case .loadReturnsJobsInPersistOrder:
            let persister = try open()
            try persister.persist(Array(jobs[0..<3]))
            for job in jobs[3..<7] { try persister.persist([job]) }
            try persister.persist(Array(jobs[7...]))
            try expectJobs(persister, jobs, "jobs with equal dates, persisted in batches and one by one")

        case .jobsSurviveReopening:
            try open().persist(Array(jobs[0..<6]))
            let second = try open()
            try expectJobs(second, Array(jobs[0..<6]), "a second persister on the same store")
            try second.persist(Array(jobs[6...]))
            try expectJobs(try open(), jobs, "a third persister after the second added more")

        case .deleteRemovesOnlyThatJob:
            let persister = try open()
            try persister.persist(Array(jobs[0..<3]))
            try persister.delete(jobs[1])
            try expectJobs(persister, [jobs[0], jobs[2]], "after deleting the middle job")
            try expectJobs(try open(), [jobs[0], jobs[2]], "after deleting and reopening")

        case .deletingAnUnknownJobDoesNothing:
            let persister = try open()
            try persister.persist([jobs[0]])
            try persister.delete(CompatTestJob(id: "never-stored"))
            try persister.delete(jobs[0])
            try persister.delete(jobs[0])
            try expectJobs(persister, [], "after deleting unknown and already deleted jobs")

        case .persistingAStoredIDReplacesItInPlace:
            let persister = try open()
            try persister.persist(Array(jobs[0..<3]))
            var changed = jobs[0]
            changed.data = Data("changed".utf8)
            changed.action = "retry"
            try persister.persist([changed])
            try expectJobs(persister, [changed, jobs[1], jobs[2]], "after persisting the first id again")
            try expectJobs(try open(), [changed, jobs[1], jobs[2]], "after replacing and reopening")

        case .newJobsGoLastAfterDeletesAndReopening:
            let persister = try open()
            try persister.persist(Array(jobs[0..<4]))
            try persister.delete(jobs[3])
            try persister.delete(jobs[0])
            let reopened = try open()
            try reopened.persist([jobs[4]])
            try reopened.persist([jobs[0]])
            try expectJobs(try open(), [jobs[1], jobs[2], jobs[4], jobs[0]], "after deleting the first and last, reopening and adding")

        case .clearRemovesEveryJob:
            let persister = try open()
            try persister.persist(jobs)
            let error = await Self.clear(persister)
            try expect(error == nil, "clear reported \(String(describing: error))")
            try expectJobs(persister, [], "after clear")
            try expectJobs(try open(), [], "after clear and reopening")
            try persister.persist([jobs[5], jobs[2]])
            try expectJobs(try open(), [jobs[5], jobs[2]], "jobs persisted after clear")
            try persister.persistFirst([jobs[7]])
            try expectJobs(try open(), [jobs[7], jobs[5], jobs[2]], "a job persisted first after clear")

        case .storesAreIsolated:
            let first = try open()
            let other = try makePersister(store + "-other")
            try first.persist(Array(jobs[0..<3]))
            try other.persist(Array(jobs[3..<5]))
            try other.persist([jobs[0]])
            try expectJobs(first, Array(jobs[0..<3]), "the first store")
            try expectJobs(other, [jobs[3], jobs[4], jobs[0]], "the other store")
            try other.delete(jobs[0])
            _ = await Self.clear(other)
            try expectJobs(try open(), Array(jobs[0..<3]), "the first store after the other was cleared")

        case .fieldsRoundTripExactly:
            let odd = [
                CompatTestJob(id: "", data: nil, action: ""),
                CompatTestJob(id: "a/b/../../c", createdDate: Date(timeIntervalSince1970: 0), data: Data()),
                CompatTestJob(id: "..", createdDate: Date(timeIntervalSinceReferenceDate: -1.5), data: Data(0...255)),
                CompatTestJob(id: "with space\ttab\nnewline", data: Data(repeating: 0, count: 1)),
                CompatTestJob(id: "ünïcødé-😀", data: Data(repeating: 0xAB, count: 256 * 1024), action: "créer ✓"),
                CompatTestJob(id: String(repeating: "long", count: 100), data: Data("x".utf8)),
                CompatTestJob(id: "UPPER-lower", createdDate: Date(timeIntervalSinceReferenceDate: 123_456_789.987654321)),
                CompatTestJob(id: "upper-lower"),
            ]
            let persister = try open()
            try persister.persist(odd)
            try expectJobs(persister, odd, "odd ids, dates and payloads")
            try expectJobs(try open(), odd, "odd ids, dates and payloads after reopening")
            for job in odd { try persister.delete(job) }
            try expectJobs(try open(), [], "after deleting each odd job")

        case .persistFirstStoresBeforeEveryStoredJob:
            let persister = try open()
            let other = try makePersister(store + "-other")
            try persister.persistFirst([])
            try expectJobs(persister, [], "after persistFirst([])")
            try persister.persistFirst([jobs[0]])
            try other.persist([jobs[9], jobs[10]])
            try persister.persist([jobs[1], jobs[2]])
            try persister.persistFirst([jobs[3], jobs[4]])
            try other.persistFirst([jobs[11]])
            try persister.persist([jobs[5]])
            try persister.persistFirst([jobs[6]])
            let expected = [jobs[6], jobs[3], jobs[4], jobs[0], jobs[1], jobs[2], jobs[5]]
            try expectJobs(persister, expected, "persist and persistFirst interleaved")
            try expectJobs(other, [jobs[11], jobs[9], jobs[10]], "another store, written in between")
            let reopened = try open()
            try expectJobs(reopened, expected, "after reopening")
            try reopened.persistFirst([jobs[7]])
            try reopened.persist([jobs[8]])
            try expectJobs(try open(), [jobs[7]] + expected + [jobs[8]], "persistFirst and persist after reopening")
            try persister.persistFirst([])
            try expectJobs(try open(), [jobs[7]] + expected + [jobs[8]], "after persistFirst([]) on a full store")

        case .persistFirstMovesAStoredIDToTheFront:
            let persister = try open()
            try persister.persist(Array(jobs[0..<4]))
            var changed = jobs[2]
            changed.data = Data("changed".utf8)
            changed.action = "retry"
            try persister.persistFirst([changed])
            try expectJobs(persister, [changed, jobs[0], jobs[1], jobs[3]], "after persisting the third id first")
            try expectJobs(try open(), [changed, jobs[0], jobs[1], jobs[3]], "after moving and reopening")
            // The job at the front, moved again with a new one: the batch's order wins.
            try persister.persistFirst([jobs[4], jobs[2]])
            try expectJobs(try open(), [jobs[4], jobs[2], jobs[0], jobs[1], jobs[3]], "after moving the first job behind a new one")
            // `persist` of a moved id keeps its new place.
            try persister.persist([changed])
            try expectJobs(try open(), [jobs[4], changed, jobs[0], jobs[1], jobs[3]], "after persisting a moved id again")
            // An id listed twice: stored once, at its first place, with its last value.
            var last = jobs[3]
            last.action = "last"
            try persister.persistFirst([jobs[3], jobs[5], last])
            try expectJobs(try open(), [last, jobs[5], jobs[4], changed, jobs[0], jobs[1]], "an id listed twice in one batch")
            // Deleting a moved job removes it for good.
            try persister.delete(last)
            try expectJobs(try open(), [jobs[5], jobs[4], changed, jobs[0], jobs[1]], "after deleting a moved job")

        case .persistFirstAfterDeletesAndReopening:
            let persister = try open()
            try persister.persist(Array(jobs[0..<3]))
            try persister.persistFirst([jobs[3]])
            try persister.delete(jobs[3])
            try persister.delete(jobs[0])
            let reopened = try open()
            try reopened.persistFirst([jobs[4]])
            try reopened.persist([jobs[5]])
            try reopened.persistFirst([jobs[0]])
            try expectJobs(try open(), [jobs[0], jobs[4], jobs[1], jobs[2], jobs[5]], "after deleting the first jobs, reopening and adding")
            for job in [jobs[0], jobs[4], jobs[1], jobs[2], jobs[5]] { try reopened.delete(job) }
            let emptied = try open()
            try emptied.persist([jobs[6]])
            try emptied.persistFirst([jobs[7]])
            try expectJobs(try open(), [jobs[7], jobs[6]], "a store emptied by deletes")

        case .concurrentPersistsAllLandOnce:
            let persister = try open()
            let threads = 8
            let perThread = 25
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                for index in 0..<perThread {
                    do {
                        try persister.persist([CompatTestJob(id: "t\(thread)-\(index)")])
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
            try expect(failures.withLock { $0 }.isEmpty, "concurrent persist failed: \(failures.withLock { $0 })")
            let loaded = try open().load().map(\.id)
            try expect(loaded.count == threads * perThread, "expected \(threads * perThread) jobs, loaded \(loaded.count)")
            try expect(Set(loaded).count == loaded.count, "some jobs loaded twice")
            for thread in 0..<threads {
                let mine = loaded.filter { $0.hasPrefix("t\(thread)-") }
                try expect(
                    mine == (0..<perThread).map { "t\(thread)-\($0)" },
                    "thread \(thread)'s jobs are out of order or missing: \(mine)"
                )
            }
        }
    }

    private static func clear(_ persister: any JobPersister<CompatTestJob>) async -> (any Error)? {
        await withCheckedContinuation { (continuation: CheckedContinuation<(any Error)?, Never>) in
            let resumed = Mutex(false)
            persister.clear { error in
                let first = resumed.withLock { resumed in
                    defer { resumed = true }
                    return !resumed
                }
                if first { continuation.resume(returning: error) }
            }
        }
    }
}
