extension JobQueue {
    /// Appends the jobs that are not `nil`, in order, to the back of the queue.
    ///
    /// The seed creates a job with `let job = try? ObservationUploadJob(.create, observation)`
    /// and then calls `observationUploadQueue.add([job])`, so `job` is an optional there. This
    /// overload makes that spelling compile: `nil` entries (jobs whose creation failed) are
    /// skipped, and the rest behave exactly as with the non-optional `add(_:)`.
    ///
    /// - Parameter jobs: The jobs to add; `nil` entries are ignored.
    public func add(_ jobs: [Job?]) {
        add(jobs.compactMap { $0 })
    }
}
