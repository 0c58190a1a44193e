import Foundation
import QueueCore
import QueueCoreTesting

// `CuteJob`, the seed's base job, is shared by every package's tests: QueueCoreTesting.

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
