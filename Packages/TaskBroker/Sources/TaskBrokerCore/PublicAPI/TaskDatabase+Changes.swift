extension TaskDatabase {
    /// The names of the queues whose stored actions change (saved, run, failed, deleted,
    /// dead-lettered, replayed, paused, resumed, purged), as they change: in this process and, on
    /// a database that other processes share (an SQLite file, PostgreSQL), in every process.
    /// What an operator's console or a dashboard listens to, to read again what changed.
    ///
    /// Each element is one batch of names (a name may repeat across batches). On an SQLite file,
    /// another process's changes are learned from its change journal; when that journal was pruned
    /// past what this process had read, the batch names every stored queue. An empty batch says
    /// that a process committed changes the journal does not name (a worker's runs completing):
    /// read again what you show. On PostgreSQL they
    /// come from the change feed, which also names every stored queue after it listens again
    /// following a lost connection.
    ///
    /// The stream listens from when this returns until its consumer stops iterating (or is
    /// cancelled); listening holds what the database's brokers also use (the file's watcher, the
    /// feed's connection), shared with them and released with the last user.
    ///
    /// - Returns: The batches of changed queue names.
    /// - Throws: ``TaskBrokerError`` with code `.storageFailed` when listening cannot start (the
    ///   PostgreSQL server does not answer, the file's journal cannot be read).
    public func queueChanges() async throws -> AsyncStream<[String]> {
        let hub = self.hub
        let release: @Sendable () -> Void
        if storage.isShared {
            try await hub.retainFeed(storage)
            release = { hub.releaseFeed() }
        } else if let machineLocal {
            release = try await machineLocal.watchOtherProcesses()
        } else {
            release = {}
        }
        let (stream, continuation) = AsyncStream.makeStream(of: [String].self, bufferingPolicy: .bufferingNewest(64))
        let listener = hub.notifier.add { changes in
            let names = changes.flatMap(\.changedQueueNames)
            if !names.isEmpty || changes.contains(where: \.isTouch) { continuation.yield(names) }
        }
        continuation.onTermination = { _ in
            hub.notifier.remove(listener)
            release()
        }
        return stream
    }
}

extension TaskChange {
    /// The queues whose stored actions this change touched (none for a change of ownership or a
    /// pool's capacity).
    var changedQueueNames: [String] {
        switch self {
        case .saved(let task), .deleted(let task), .completed(let task): [task.queueName]
        case .resumed(let queueNames, _), .external(let queueNames), .parallelReady(let queueNames): queueNames
        case .purged(let queueName): [queueName]
        case .externalEverywhere(let storedQueues): storedQueues
        case .unowned, .spareCapacity, .touched: []
        }
    }

    /// A commit that names no queue (``touched``).
    var isTouch: Bool {
        if case .touched = self { true } else { false }
    }
}
