import Foundation
import QueueCore
import Synchronization

/// A job as an app would define it (the seed's `CuteJob` shape).
struct UploadJob: QueueJob, Equatable {
    let id: String
    let createdDate: Date
    let data: Data?
    let action: String

    init(id: String, body: String = "") {
        self.id = id
        self.createdDate = Date(timeIntervalSince1970: 1_700_000_000)
        self.data = Data(body.utf8)
        self.action = "upload"
    }
}

/// The error a failing job throws.
struct SimulatedFailure: Error, Equatable {
    let jobID: String
}

/// A fresh folder under the system's temporary directory, deleted when released.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("queuekit-integration-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

/// What a ``ScriptedProcessor`` does with one attempt of a job.
enum ScriptedOutcome: Sendable {
    case succeed
    case fail
    /// Never complete: the process "dies" while the job runs.
    case stall
}

/// A callback processor that follows a script per job id and attempt (1 for the first), and
/// records `"<label>:<id>"` for every attempt it starts.
final class ScriptedProcessor: JobProcessor, Sendable {
    typealias JobType = UploadJob

    private let label: String
    private let script: @Sendable (_ id: String, _ attempt: Int) -> ScriptedOutcome
    private let record: @Sendable (String) -> Void
    private let attempts = Mutex<[String: Int]>([:])
    private let held = Mutex<[@Sendable (UploadJob, (any Error)?) -> Void]>([])

    init(
        label: String,
        record: @escaping @Sendable (String) -> Void,
        script: @escaping @Sendable (_ id: String, _ attempt: Int) -> ScriptedOutcome = { _, _ in .succeed }
    ) {
        self.label = label
        self.record = record
        self.script = script
    }

    func processJob(_ job: UploadJob, completion: @escaping @Sendable (UploadJob, (any Error)?) -> Void) {
        let attempt = attempts.withLock { attempts -> Int in
            attempts[job.id, default: 0] += 1
            return attempts[job.id, default: 0]
        }
        record("\(label):\(job.id)")
        switch script(job.id, attempt) {
        case .succeed: completion(job, nil)
        case .fail: completion(job, SimulatedFailure(jobID: job.id))
        case .stall: held.withLock { $0.append(completion) }
        }
    }
}
