import Dispatch
import Synchronization

/// Lets many threads share one durable commit.
///
/// Each caller queues its work and blocks. The first caller with no leader running becomes
/// the leader: it takes everything queued so far (its own work first), commits it in one
/// transaction, hands each caller its result, wakes them, and passes the leadership to the
/// oldest caller still waiting, if any. Callers therefore return only once their work is
/// committed, while one `fsync` serves a whole batch. No lock is held while committing.
final class GroupCommitWriter<Operation: Sendable>: Sendable {
    private enum Outcome: Sendable {
        case done(Result<Void, PersistenceError>)
        case lead
    }

    private final class Request: Sendable {
        let operation: Operation
        private let outcome = Mutex<Outcome?>(nil)
        private let wakeUp = DispatchSemaphore(value: 0)

        init(_ operation: Operation) {
            self.operation = operation
        }

        func resolve(_ value: Outcome) {
            outcome.withLock { $0 = value }
            wakeUp.signal()
        }

        func wait() -> Outcome {
            wakeUp.wait()
            return outcome.withLock { outcome in
                let value = outcome ?? .lead
                outcome = nil
                return value
            }
        }
    }

    private struct State {
        var pending: [Request] = []
        var hasLeader = false
    }

    private let state = Mutex(State())
    private let maximumBatchSize: Int
    private let commit: @Sendable ([Operation]) throws(PersistenceError) -> Void
    private let didEnqueue: (@Sendable (Operation) -> Void)?
    private let retriesAlone: @Sendable (PersistenceError) -> Bool
    private let commitCount = Atomic<Int>(0)

    /// - Parameters:
    ///   - maximumBatchSize: At most this many callers share one commit.
    ///   - didEnqueue: Told each operation as it is queued (for tests).
    ///   - retriesAlone: Whether a batch that failed with this error is committed again one
    ///     caller at a time (the error may be one caller's); `false` fails every caller with it
    ///     (the storage refused the whole transaction: a held lock, a full disk).
    ///   - commit: Applies every operation in one transaction, or none of them.
    init(
        maximumBatchSize: Int,
        didEnqueue: (@Sendable (Operation) -> Void)? = nil,
        retriesAlone: @escaping @Sendable (PersistenceError) -> Bool = { _ in true },
        commit: @escaping @Sendable ([Operation]) throws(PersistenceError) -> Void
    ) {
        self.maximumBatchSize = max(1, maximumBatchSize)
        self.didEnqueue = didEnqueue
        self.retriesAlone = retriesAlone
        self.commit = commit
    }

    /// How many commits (transactions) have been attempted so far.
    var commits: Int {
        commitCount.load(ordering: .relaxed)
    }

    /// Commits `operation`, possibly together with other callers' operations, and returns
    /// once it is committed.
    func submit(_ operation: Operation) throws(PersistenceError) {
        let request = Request(operation)
        let leads = state.withLock { state in
            state.pending.append(request)
            if state.hasLeader { return false }
            state.hasLeader = true
            return true
        }
        didEnqueue?(operation)
        if !leads {
            switch request.wait() {
            case .done(let result):
                return try result.get()
            case .lead:
                break
            }
        }
        // The leader is always the oldest pending request, so the batch starts with it.
        let batch = state.withLock { state in
            let count = min(state.pending.count, maximumBatchSize)
            let batch = Array(state.pending.prefix(count))
            state.pending.removeFirst(count)
            return batch
        }
        let results = run(batch)
        let next = state.withLock { state -> Request? in
            if let first = state.pending.first { return first }
            state.hasLeader = false
            return nil
        }
        var own: Result<Void, PersistenceError> = .success(())
        for (index, member) in batch.enumerated() {
            if member === request {
                own = results[index]
            } else {
                member.resolve(.done(results[index]))
            }
        }
        next?.resolve(.lead)
        return try own.get()
    }

    /// Commits the batch at once; if that fails and it holds several callers, commits each
    /// alone so that one caller's failure is not everyone's, unless the error is the storage's
    /// refusal of any transaction (`retriesAlone`): each commit alone would wait out the same
    /// lock again, one after another, while every caller blocks.
    private func run(_ batch: [Request]) -> [Result<Void, PersistenceError>] {
        do throws(PersistenceError) {
            commitCount.add(1, ordering: .relaxed)
            try commit(batch.map(\.operation))
            return Array(repeating: .success(()), count: batch.count)
        } catch {
            guard batch.count > 1, retriesAlone(error) else { return Array(repeating: .failure(error), count: batch.count) }
            return batch.map { member in
                do throws(PersistenceError) {
                    commitCount.add(1, ordering: .relaxed)
                    try commit([member.operation])
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
        }
    }
}
