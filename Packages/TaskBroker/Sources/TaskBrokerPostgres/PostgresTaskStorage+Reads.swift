public import Foundation
public import TaskBrokerCore
import PostgresNIO

// Listing queues and reading their actions.
extension PostgresTaskStorage: LeaseAwareReads {
    /// The names of every queue that has stored actions, sorted.
    public func queueNames() async throws -> [String] {
        try await run("list the queues") {
            try await withConnection { [self] connection in
                var names: [String] = []
                for try await name in try await connection.query(sql.queueNamesQuery(), logger: logger).decode(String.self) {
                    names.append(name)
                }
                return names
            }
        }
    }

    /// A page of the names of the queues that have stored actions, after `name`.
    public func queueNames(after name: String?, limit: Int) async throws -> [String] {
        try await run("list the queues") {
            try await withConnection { [self] connection in
                var names: [String] = []
                let rows = try await connection.query(sql.queueNamesQuery(after: name, limit: max(1, limit)), logger: logger)
                for try await name in rows.decode(String.self) {
                    names.append(name)
                }
                return names
            }
        }
    }

    /// Every stored action of the given queue(s), in enqueue order.
    public func tasks(inQueue queueName: String) async throws -> [StoredTask] {
        try await tasks(inQueues: [queueName])[queueName] ?? []
    }

    /// Every stored action of the given queue(s), in enqueue order.
    public func tasks(inQueues queueNames: [String]) async throws -> [String: [StoredTask]] {
        guard !queueNames.isEmpty else { return [:] }
        return try await run("read \(queueNames.count) queue(s)") {
            var result = try await withConnection { [self] connection in
                var result: [String: [StoredTask]] = [:]
                let rows = try await connection.query(sql.tasksQuery(queueNames: queueNames), logger: logger)
                for try await row in rows {
                    let task = try PostgresSchema.task(row)
                    result[task.queueName, default: []].append(task)
                }
                return result
            }
            // In enqueue order (the statement does not sort; rows mostly come in that order already).
            // In place, through `values[index]`: sorting through `result[queueName]?` copied every
            // queue's array, and a profile of reads of 25,600 actions showed the copies (~4 % of its samples).
            for index in result.values.indices where !result.values[index].isInEnqueueOrder {
                result.values[index].sort { $0.position < $1.position }
            }
            return result
        }
    }

    /// The first `limit` stored actions of each of the given queues after the given positions, in enqueue order.
    public func tasks(inQueues queueNames: [String], after positions: [String: Int64], limit: Int) async throws -> [String: [StoredTask]] {
        guard !queueNames.isEmpty else { return [:] }
        let after = queueNames.map { positions[$0] ?? .min }
        return try await run("read \(queueNames.count) queue(s)") {
            try await withConnection { [self] connection in
                var result: [String: [StoredTask]] = [:]
                let rows = try await connection.query(
                    sql.tasksQuery(queueNames: queueNames, after: after, limit: max(1, limit)), logger: logger
                )
                for try await row in rows {
                    let task = try PostgresSchema.task(row)
                    result[task.queueName, default: []].append(task)
                }
                return result
            }
        }
    }

    /// The first `limit` stored actions of each queue, the head alone of a queue another owner
    /// holds, and which of the queues an operator paused; takes the lease of up to `claimBudget`
    /// free queues (see `LeaseAwareReads`).
    public func tasks(
        inQueues queueNames: [String], limit: Int, readingFor owner: String, claimBudget: Int, leaseDuration: Duration, now: Date
    ) async throws -> LeaseAwareRead {
        guard !queueNames.isEmpty else { return LeaseAwareRead(tasks: [:], heldElsewhere: [:], paused: []) }
        return try await run("read \(queueNames.count) queue(s)") {
            try await withConnection { [self] connection in
                var read = LeaseAwareRead(tasks: [:], heldElsewhere: [:], paused: [])
                let clock = Date()
                let rows = try await connection.query(
                    sql.tasksQuery(
                        queueNames: queueNames, limit: max(1, limit), readingFor: owner, claimBudget: max(0, claimBudget),
                        leaseMilliseconds: leaseDuration.milliseconds, now: now.timeIntervalSince1970
                    ),
                    logger: logger
                )
                for try await row in rows {
                    var cells = RowReader(row)
                    let queueName: String = try cells.next()
                    let remaining: Double? = try cells.next()
                    if try cells.next(Bool.self) { read.paused.insert(queueName) }
                    if let epoch: Int64 = try cells.next() {
                        read.claimed[queueName] = epoch
                        continue
                    }
                    // A queue with nothing stored: its row has no action.
                    guard let collection: String = try cells.next() else { continue }
                    let task = try PostgresSchema.task(collection: collection, &cells)
                    if let remaining { read.heldElsewhere[queueName] = clock.addingTimeInterval(max(0, remaining)) }
                    read.tasks[queueName, default: []].append(task)
                }
                // A lease that ended between the snapshot and the statement's lock of it: taken
                // here, though the snapshot still showed it held (its head alone was read).
                for queueName in read.claimed.keys { read.heldElsewhere[queueName] = nil }
                return read
            }
        }
    }

    /// Actions saved to run later whose time has come (see `TaskStorage.scheduled(after:through:limit:)`).
    public func scheduled(after cursor: TaskScheduleEntry?, through: Date, limit: Int) async throws -> [TaskScheduleEntry] {
        try await run("read the schedule") {
            try await withConnection { [self] connection in
                var entries: [TaskScheduleEntry] = []
                let rows = try await connection.query(
                    sql.scheduledQuery(
                        afterTime: cursor?.notBefore.timeIntervalSince1970 ?? -Double.greatestFiniteMagnitude,
                        afterPosition: cursor?.position ?? .min, through: through.timeIntervalSince1970, limit: max(1, limit)
                    ),
                    logger: logger
                )
                for try await (queueName, notBefore, position) in rows.decode((String, Double, Int64).self) {
                    entries.append(TaskScheduleEntry(queueName: queueName, notBefore: Date(timeIntervalSince1970: notBefore), position: position))
                }
                return entries
            }
        }
    }

    /// The earliest not-before time after `date` (see `TaskStorage.nextNotBefore(after:)`).
    public func nextNotBefore(after date: Date) async throws -> Date? {
        try await run("read the schedule") {
            try await withConnection { [self] connection in
                var next: Date?
                for try await seconds in try await connection.query(sql.nextNotBeforeQuery(after: date.timeIntervalSince1970), logger: logger)
                    .decode(Double.self) {
                    next = Date(timeIntervalSince1970: seconds)
                }
                return next
            }
        }
    }
}
