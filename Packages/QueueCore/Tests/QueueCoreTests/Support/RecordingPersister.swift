import QueueCore
import QueueCoreTesting
import Synchronization

/// An in-memory persister that records every call, and can be told to fail.
final class RecordingPersister: JobPersister, Sendable {
    typealias JobType = CuteJob

    enum Call: Equatable {
        case persist([String])
        case persistFirst([String])
        case delete(String)
        case load
        case clear
    }

    private struct State {
        var jobs: [CuteJob] = []
        var calls: [Call] = []
        var failing = false
        /// Jobs whose delete fails, by id.
        var undeletable: Set<String> = []
        /// Called with the ids before `persistFirst` stores anything (outside the lock).
        var willPersistFirst: (@Sendable ([String]) -> Void)?
    }

    private let state: Mutex<State>

    init(jobs: [CuteJob] = [], failing: Bool = false) {
        state = Mutex(State(jobs: jobs, failing: failing))
    }

    /// The stored jobs, in stored order.
    var jobs: [CuteJob] { state.withLock { $0.jobs } }
    var storedIDs: [String] { jobs.map(\.id) }
    var calls: [Call] { state.withLock { $0.calls } }

    var failing: Bool {
        get { state.withLock { $0.failing } }
        set { state.withLock { $0.failing = newValue } }
    }

    /// Called with the ids before `persistFirst` stores anything, outside the persister's lock
    /// (a test may hold the call there).
    var willPersistFirst: (@Sendable ([String]) -> Void)? {
        get { state.withLock { $0.willPersistFirst } }
        set { state.withLock { $0.willPersistFirst = newValue } }
    }

    /// Jobs whose delete throws (a bad sector under one file), by id.
    var undeletable: Set<String> {
        get { state.withLock { $0.undeletable } }
        set { state.withLock { $0.undeletable = newValue } }
    }

    func persist(_ jobs: [CuteJob]) throws {
        try state.withLock { state in
            state.calls.append(.persist(jobs.map(\.id)))
            if state.failing { throw TestFailure(reason: "disk full") }
            for job in jobs {
                if let index = state.jobs.firstIndex(where: { $0.id == job.id }) {
                    state.jobs[index] = job
                } else {
                    state.jobs.append(job)
                }
            }
        }
    }

    /// Stores `jobs` ahead of every stored job (a stored id moves to the front); when
    /// `failing`, throws and changes nothing.
    func persistFirst(_ jobs: [CuteJob]) throws {
        willPersistFirst?(jobs.map(\.id))
        try state.withLock { state in
            state.calls.append(.persistFirst(jobs.map(\.id)))
            if state.failing { throw TestFailure(reason: "disk full") }
            var front: [CuteJob] = []
            for job in jobs {
                if let index = front.firstIndex(where: { $0.id == job.id }) {
                    front[index] = job
                } else {
                    front.append(job)
                }
            }
            state.jobs.removeAll { stored in front.contains { $0.id == stored.id } }
            state.jobs.insert(contentsOf: front, at: 0)
        }
    }

    func delete(_ job: CuteJob) throws {
        try state.withLock { state in
            state.calls.append(.delete(job.id))
            if state.failing || state.undeletable.contains(job.id) { throw TestFailure(reason: "disk gone") }
            state.jobs.removeAll { $0.id == job.id }
        }
    }

    func load() throws -> [CuteJob] {
        try state.withLock { state in
            state.calls.append(.load)
            if state.failing { throw TestFailure(reason: "unreadable") }
            return state.jobs
        }
    }

    func clear(completion: (@Sendable ((any Error)?) -> Void)?) {
        let failing = state.withLock { state -> Bool in
            state.calls.append(.clear)
            if !state.failing { state.jobs.removeAll() }
            return state.failing
        }
        completion?(failing ? TestFailure(reason: "cannot clear") : nil)
    }
}

/// A persister written against the seed's four requirements only (`persist`, `delete`, `load`,
/// `clear`), as a third party's would be: it gets the protocol's default `persistFirst`. It
/// stores through a ``RecordingPersister``, so a test sees which calls the default made.
final class SeedShapedPersister: JobPersister, Sendable {
    let recording: RecordingPersister

    init(_ recording: RecordingPersister = RecordingPersister()) {
        self.recording = recording
    }

    func persist(_ jobs: [CuteJob]) throws { try recording.persist(jobs) }

    func delete(_ job: CuteJob) throws { try recording.delete(job) }

    func load() throws -> [CuteJob] { try recording.load() }

    func clear(completion: (@Sendable ((any Error)?) -> Void)?) { recording.clear(completion: completion) }
}
