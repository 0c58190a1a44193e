import Foundation
import QueueCore

// The seed's base job, exactly as its README writes it.
struct CuteJob: QueueJob {
  private(set) var id: String = UUID().uuidString
  private(set) var createdDate = Date()
  var data: Data?
  var action: String = ""
}

extension CuteJob: Equatable {
    static func == (lhs: CuteJob, rhs: CuteJob) -> Bool {
        lhs.id == rhs.id && lhs.action == rhs.action && lhs.data == rhs.data
    }
}

/// `count` jobs whose actions are "0", "1", … so that order is easy to read in failures.
func makeJobs(count: Int, prefix: String = "") -> [CuteJob] {
    (0..<count).map { index in
        var job = CuteJob()
        job.action = "\(prefix)\(index)"
        return job
    }
}

/// The error the failing test doubles report.
struct TestFailure: Error, Equatable {
    var reason = "test failure"
}
