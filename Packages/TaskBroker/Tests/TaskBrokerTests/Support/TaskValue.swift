// A test's time limit cancels the test's own task, not the tasks it made: a test awaiting
// `task.value` of one that never ends (a broker that does not stop, a transaction waiting for a
// signal the failed test never sends) kept the whole test process alive past every limit. These
// cancel the awaited task when the awaiting test is cancelled.
extension Task where Failure == Never {
    /// `value`, cancelling the task when the caller is cancelled.
    var valueOrCancel: Success {
        get async { await withTaskCancellationHandler { await value } onCancel: { cancel() } }
    }
}

extension Task where Failure == any Error {
    /// `value`, cancelling the task when the caller is cancelled.
    var valueOrCancel: Success {
        get async throws { try await withTaskCancellationHandler { try await value } onCancel: { cancel() } }
    }
}
