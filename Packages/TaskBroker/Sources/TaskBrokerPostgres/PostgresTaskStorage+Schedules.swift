public import Foundation
import PostgresNIO
public import TaskBrokerCore

// Schedules: the rows of the `schedule` table.
extension PostgresTaskStorage {
    /// Records the schedules a scheduler runs (see `TaskStorage.registerSchedules(_:)`).
    public func registerSchedules(_ schedules: [TaskScheduleState]) async throws {
        guard !schedules.isEmpty else { return }
        try await transaction("record \(schedules.count) schedule(s)", on: writeClient) { [self] connection in
            // In name order: two schedulers registering the same schedules take the rows' locks in one order.
            for schedule in schedules.sorted(by: { $0.name < $1.name }) {
                try await connection.execute(
                    """
                    INSERT INTO \(unescaped: sql.schedule) (name, recurrence, next_tick) VALUES (\(schedule.name), \(schedule.recurrence), \(schedule.nextTick?.timeIntervalSince1970))
                    ON CONFLICT (name) DO UPDATE SET recurrence = excluded.recurrence, next_tick = excluded.next_tick
                    """,
                    logger: logger
                )
            }
        }
    }

    /// Records a tick and saves its action if absent, in one transaction that holds the
    /// schedule's row: of several processes recording one tick at once, the first records it and
    /// the others find it recorded (see `TaskStorage.recordTick(schedule:tick:next:task:)`).
    public func recordTick(schedule name: String, tick: Date, next: Date?, task: NewTask) async throws -> TaskTickRecord {
        try Self.checkLengths(of: [task])
        return try await transaction("record tick \(name)@\(tick.timeIntervalSince1970)", on: writeClient) { [self] connection in
            try await connection.execute(
                "INSERT INTO \(unescaped: sql.schedule) (name, recurrence) VALUES (\(name), '') ON CONFLICT (name) DO NOTHING",
                logger: logger
            )
            var last: Double?
            for try await value in try await connection.query(
                "SELECT last_tick FROM \(unescaped: sql.schedule) WHERE name = \(name) FOR UPDATE", logger: logger
            ).decode(Double?.self) {
                last = value
            }
            if let last, last >= tick.timeIntervalSince1970 {
                return .alreadyRecorded(lastTick: Date(timeIntervalSince1970: last))
            }
            let stored = try await saveIfAbsent(task, on: connection)
            try await connection.execute(
                """
                UPDATE \(unescaped: sql.schedule) SET last_tick = \(tick.timeIntervalSince1970),
                    last_enqueued_at = extract(epoch FROM clock_timestamp()), last_key = \(task.key), next_tick = \(next?.timeIntervalSince1970)
                WHERE name = \(name)
                """,
                logger: logger
            )
            return stored.map(TaskTickRecord.enqueued) ?? .keyStillStored
        }
    }

    /// The stored schedules, by name (see `TaskStorage.schedules()`).
    public func schedules() async throws -> [TaskScheduleState] {
        try await run("read the schedules") {
            try await withConnection { [self] connection in
                var states: [TaskScheduleState] = []
                let rows = try await connection.query(
                    "SELECT name, recurrence, last_tick, last_enqueued_at::double precision, last_key, next_tick FROM \(unescaped: sql.schedule) ORDER BY name",
                    logger: logger
                )
                for try await (name, recurrence, lastTick, enqueuedAt, lastKey, nextTick) in rows.decode((String, String, Double?, Double?, String?, Double?).self) {
                    states.append(TaskScheduleState(
                        name: name, recurrence: recurrence,
                        lastTick: lastTick.map(Date.init(timeIntervalSince1970:)),
                        lastEnqueuedAt: enqueuedAt.map(Date.init(timeIntervalSince1970:)),
                        lastKey: lastKey, nextTick: nextTick.map(Date.init(timeIntervalSince1970:))
                    ))
                }
                return states
            }
        }
    }
}
