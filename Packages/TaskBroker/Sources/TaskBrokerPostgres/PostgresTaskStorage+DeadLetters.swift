public import TaskBrokerCore
import PostgresNIO

// Dead letters: rows of the action table whose state is 1, never read as part of their queue.
extension PostgresTaskStorage {
    /// The dead letters of one queue, or of every queue (see `TaskStorage.deadLetters(queueName:)`).
    public func deadLetters(queueName: String?) async throws -> [StoredTask] {
        try await run("read the dead letters") {
            try await withConnection { [self] connection in
                var tasks: [StoredTask] = []
                for try await row in try await connection.query(sql.deadLettersQuery(queueName: queueName), logger: logger) {
                    tasks.append(try PostgresSchema.task(row))
                }
                return tasks
            }
        }
    }

    /// The stored action with this key and collection, live or a dead letter (see
    /// `TaskStorage.lookup(key:collection:)`).
    public func lookup(key: String, collection: String) async throws -> TaskLookup? {
        try await run("find action \(collection)/\(key)") {
            try await withConnection { [self] connection in
                for try await row in try await connection.query(sql.lookupQuery(collection: collection, key: key), logger: logger) {
                    let task = try PostgresSchema.task(row)
                    let state = try row.makeRandomAccess()["state"].decode(Int16.self)
                    return state == 1 ? TaskLookup.deadLetter(task) : .live(task)
                }
                return nil
            }
        }
    }

    /// Puts a dead letter back at its place in its queue, as a new save; every worker hears of
    /// its queue (see `TaskStorage.replayDeadLetter(key:collection:)`).
    public func replayDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await transaction("replay dead letter \(collection)/\(key)", on: writeClient) { [self] connection in
            var replayed: StoredTask?
            for try await row in try await connection.query(sql.replayDeadLetterQuery(collection: collection, key: key), logger: logger) {
                replayed = try PostgresSchema.task(row)
            }
            if let replayed {
                try await notify(ChangeMessage.chunks(queues: [replayed.queueName]), on: connection)
            }
            return replayed
        }
    }

    /// Deletes a dead letter (see `TaskStorage.discardDeadLetter(key:collection:)`).
    public func discardDeadLetter(key: String, collection: String) async throws -> StoredTask? {
        try await transaction("discard dead letter \(collection)/\(key)", on: writeClient) { [self] connection in
            var discarded: StoredTask?
            for try await row in try await connection.query(sql.discardDeadLetterQuery(collection: collection, key: key), logger: logger) {
                discarded = try PostgresSchema.task(row)
            }
            return discarded
        }
    }
}

// Queues an operator paused: the `paused` mark of their rows in the queue table.
extension PostgresTaskStorage {
    /// Marks queues paused (or not) and notifies every worker of those whose mark changed.
    public func setPaused(_ paused: Bool, queues queueNames: [String]) async throws -> [String] {
        guard !queueNames.isEmpty else { return [] }
        return try await transaction("\(paused ? "pause" : "resume") \(queueNames.count) queue(s)", on: writeClient) { [self] connection in
            var changed: [String] = []
            for try await name in try await connection.query(sql.setPausedQuery(queueNames: queueNames, paused: paused), logger: logger)
                .decode(String.self) {
                changed.append(name)
            }
            changed.sort()
            if !changed.isEmpty {
                try await notify(ChangeMessage.chunks(queues: changed), on: connection)
                // Their plain parallel actions may run again: brokers claim some.
                if !paused { try await notify(ChangeMessage.parallel(changed), on: connection) }
            }
            return changed
        }
    }

    /// The queues among these (or all) that an operator paused.
    public func pausedQueues(among queueNames: [String]?) async throws -> Set<String> {
        if let queueNames, queueNames.isEmpty { return [] }
        return try await run("read the paused queues") {
            try await withConnection { [self] connection in
                var paused: Set<String> = []
                for try await name in try await connection.query(sql.pausedQueuesQuery(queueNames: queueNames), logger: logger).decode(String.self) {
                    paused.insert(name)
                }
                return paused
            }
        }
    }
}
