import Foundation
import JobChain

// Chains 100,000 no-op commands that must run one after another on the background queue:
// with one `Job`, and with `BlockOperation`s that each depend on the previous one on an
// `OperationQueue`, measured in the same run. Both include building the chain.
//
// The peer gets its fastest setup: `maxConcurrentOperationCount = 1` (on Linux a concurrent
// `OperationQueue` rescans its pending operations each time one finishes — 8,000 chained
// operations took 9 s, 100,000 would take ~25 minutes). Foundation releases a dependency
// chain recursively, which overflows the stack at 100,000 operations, so the chain is
// unlinked after the timed part.

let commands = 100_000
let rounds = 3
let target = 5.0

func jobChain() -> Duration {
    let clock = ContinuousClock()
    return clock.measure {
        let job = Job(mode: .auto)
        for _ in 0..<commands {
            job.doInBackground {}
        }
        job.await()
    }
}

func operationChain() -> Duration {
    let clock = ContinuousClock()
    var operations: [Operation] = []
    operations.reserveCapacity(commands)
    let elapsed = clock.measure {
        let queue = OperationQueue()
        queue.qualityOfService = .background
        queue.maxConcurrentOperationCount = 1
        var previous: Operation?
        for _ in 0..<commands {
            let operation = BlockOperation {}
            if let previous { operation.addDependency(previous) }
            operations.append(operation)
            previous = operation
        }
        queue.addOperations(operations, waitUntilFinished: true)
    }
    for operation in operations {
        for dependency in operation.dependencies {
            operation.removeDependency(dependency)
        }
    }
    return elapsed
}

func seconds(_ duration: Duration) -> Double {
    let (whole, fraction) = duration.components
    return Double(whole) + Double(fraction) / 1e18
}

func format(_ value: Double) -> String {
    String(format: "%.3f", value)
}

// Warm up both paths once.
print("ours warm-up: \(jobChain())")
print("peer warm-up: \(operationChain())")

var ours: [Double] = []
var peer: [Double] = []
for _ in 0..<rounds {
    ours.append(seconds(jobChain()))
    peer.append(seconds(operationChain()))
}
let oursBest = ours.min() ?? 0
let peerBest = peer.min() ?? 0
let ratio = oursBest > 0 ? peerBest / oursBest : 0

print("JobChain: \(commands) chained no-op commands on the background queue (best of \(rounds))")
print("  Job.doInBackground chain:            \(format(oursBest)) s  (\(String(format: "%.0f", Double(commands) / oursBest)) commands/s)")
print("  OperationQueue, BlockOperation deps: \(format(peerBest)) s  (\(String(format: "%.0f", Double(commands) / peerBest)) commands/s)")
print("  ratio: \(String(format: "%.1f", ratio))x faster (target: at least \(String(format: "%.0f", target))x)")
