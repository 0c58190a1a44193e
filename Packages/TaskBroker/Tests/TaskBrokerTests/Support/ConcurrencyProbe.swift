import AsyncPrimitivesTesting
import Synchronization

/// Records, per queue, the order actions started in and whether two ever overlapped.
final class ConcurrencyProbe: Sendable {
    private let state = Mutex<(running: Set<String>, overlaps: Int, order: [String: [String]])>(([], 0, [:]))
    let finished = EventCollector<String>()

    func run(_ action: TestAction) async {
        let queue = String(action.key.split(separator: "-")[0])
        state.withLock { state in
            if !state.running.insert(queue).inserted { state.overlaps += 1 }
            state.order[queue, default: []].append(action.key)
        }
        try? await Task.sleep(for: .milliseconds(2))
        state.withLock { _ = $0.running.remove(queue) }
        finished.record(action.key)
    }

    var overlaps: Int { state.withLock { $0.overlaps } }

    func order(of queue: String) -> [String] {
        state.withLock { $0.order[queue] ?? [] }
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self {
            result.append(try await transform(element))
        }
        return result
    }
}
