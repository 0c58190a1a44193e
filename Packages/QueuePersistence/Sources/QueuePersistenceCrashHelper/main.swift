// Adds jobs through a persister until it is killed, printing `P <id>` once `persist` has
// returned for a job and `D <id>` once `delete` has returned. The crash test kills it with
// SIGKILL and checks that every acknowledged job is stored intact, exactly once.
//
// Usage: QueuePersistenceCrashHelper file|sqlite <folder or database path> <run tag> <threads>
import Dispatch
import Foundation
import QueueCore
import QueuePersistence

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

struct CrashJob: QueueJob {
    var id: String
    var createdDate: Date
    var data: Data?
    var action: String
}

/// The payload a job with `id` carries, so that the test can check it came back intact.
func payload(for id: String) -> Data {
    Data(String(repeating: id + ";", count: 8).utf8)
}

/// Writes one whole line with a single `write(2)`, so lines from threads never interleave.
func say(_ line: String) {
    var line = line + "\n"
    line.withUTF8 { buffer in
        _ = write(1, buffer.baseAddress, buffer.count)
    }
}

func fail(_ message: String) -> Never {
    var line = message + "\n"
    line.withUTF8 { buffer in
        _ = write(2, buffer.baseAddress, buffer.count)
    }
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 5, let threads = Int(arguments[4]) else {
    fail("usage: QueuePersistenceCrashHelper file|sqlite PATH TAG THREADS")
}
let location = arguments[2]
let tag = arguments[3]

let persister: AnyJobPersister<CrashJob>
do {
    if arguments[1] == "sqlite" {
        persister = AnyJobPersister(try SQLiteJobPersister(handling: CrashJob.self, queueName: "crash", path: location))
    } else {
        persister = AnyJobPersister(
            FileBasedPersister(handling: CrashJob.self, queueName: "crash", directory: URL(fileURLWithPath: location))
        )
    }
} catch {
    fail("open failed: \(error)")
}
say("READY")

DispatchQueue.concurrentPerform(iterations: threads) { thread in
    for index in 0..<100_000 {
        let id = "\(tag)-\(thread)-\(index)"
        let job = CrashJob(
            id: id,
            createdDate: Date(timeIntervalSinceReferenceDate: Double(index)),
            data: payload(for: id),
            action: "crash"
        )
        do {
            try persister.persist([job])
            say("P \(id)")
            if index % 3 == 0 {
                try persister.delete(job)
                say("D \(id)")
            }
        } catch {
            fail("failed: \(error)")
        }
    }
}
