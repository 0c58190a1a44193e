import AsyncPrimitivesTesting
import Foundation
import QueueCore
import Synchronization
import QueueCoreTesting

// The Cute README's examples, kept compiling. `Observation` stands in for FireKit's.

final class Observation: Codable {
    var valueString: String?
    var subject: String?
}

enum UploadAction: String {
    case create, update, delete
}

// The seed's base job, exactly as its README writes it, under another name: the seed's
// extension below assigns its fields in an `init`, which Swift allows only in the module that
// declares the struct, so it cannot extend the shared `QueueCoreTesting.CuteJob`.
struct SeedCuteJob: QueueJob {
  private(set) var id: String = UUID().uuidString
  private(set) var createdDate = Date()
  var data: Data?
  var action: String = ""
}

typealias ObservationUploadJob = SeedCuteJob
extension ObservationUploadJob {

    var uploadAction: UploadAction? {
        return UploadAction(rawValue: action)
    }

    init(_ action: UploadAction, _ observation: Observation) throws {
        self.action = action.rawValue
        self.data = try JSONEncoder().encode(observation)
    }
}

// The seed's processor shape: a plain class with a `var`, and `Error?` in the completion.
final class ObservationUploadJobProcessor: JobProcessor {
    typealias JobType = ObservationUploadJob

    var uploaded: [UploadAction] = []
    let done = EventCollector<String>()

    func processJob(_ job: ObservationUploadJob, completion: @escaping ((ObservationUploadJob, Error?) -> Void)) {
        if let action = job.uploadAction {
            uploaded.append(action)
        }
        done.record(job.id)
        completion(job, nil)
    }
}


/// An in-memory persister of the seed's job type, for the seed's persister hook-up example.
final class SeedMemoryPersister: JobPersister, Sendable {
    private let stored = Mutex<[ObservationUploadJob]>([])

    func persist(_ jobs: [ObservationUploadJob]) throws {
        stored.withLock { stored in
            for job in jobs where !stored.contains(where: { $0.id == job.id }) { stored.append(job) }
        }
    }

    func delete(_ job: ObservationUploadJob) throws {
        stored.withLock { $0.removeAll { $0.id == job.id } }
    }

    func load() throws -> [ObservationUploadJob] {
        stored.withLock { $0 }
    }

    func clear(completion: (@Sendable ((any Error)?) -> Void)?) {
        stored.withLock { $0.removeAll() }
        completion?(nil)
    }
}
