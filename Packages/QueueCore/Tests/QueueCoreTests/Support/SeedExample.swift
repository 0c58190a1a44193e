import AsyncPrimitivesTesting
import Foundation
import QueueCore

// The Cute README's examples, kept compiling. `Observation` stands in for FireKit's.

final class Observation: Codable {
    var valueString: String?
    var subject: String?
}

enum UploadAction: String {
    case create, update, delete
}

typealias ObservationUploadJob = CuteJob
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

