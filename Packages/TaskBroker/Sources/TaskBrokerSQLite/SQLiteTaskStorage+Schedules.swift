import Foundation
import GRDB
import TaskBrokerCore

// Schedules: the rows of `taskbroker_schedule`.
extension SQLiteTaskStorage {
    func registerSchedules(_ schedules: [TaskScheduleState]) async throws {
        guard !schedules.isEmpty else { return }
        _ = try await write("record \(schedules.count) schedule(s)", announcing: { (_: Bool) in [] }) { db in
            let statement = try db.cachedStatement(sql: """
                INSERT INTO taskbroker_schedule (name, recurrence, next_tick) VALUES (?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET recurrence = excluded.recurrence, next_tick = excluded.next_tick
                """)
            for schedule in schedules {
                try statement.execute(arguments: [schedule.name, schedule.recurrence, schedule.nextTick?.timeIntervalSince1970])
            }
            return true
        }
    }

    func recordTick(schedule name: String, tick: Date, next: Date?, task: NewTask) async throws -> TaskTickRecord {
        try await write(
            "record tick \(name)@\(tick.timeIntervalSince1970)",
            announcing: { record in if case .enqueued(let stored) = record { [.saved(stored)] } else { [] } }
        ) { db in
            // The write transaction holds the file's one writer: no other process records at once.
            if let last = try Double.fetchOne(db, sql: "SELECT last_tick FROM taskbroker_schedule WHERE name = ?", arguments: [name]),
               last >= tick.timeIntervalSince1970 {
                return .alreadyRecorded(lastTick: Date(timeIntervalSince1970: last))
            }
            let stored = try Self.saveIfAbsent(task, in: db)
            try db.execute(
                sql: """
                    INSERT INTO taskbroker_schedule (name, recurrence, last_tick, last_enqueued_at, last_key, next_tick)
                    VALUES (?1, '', ?2, ?3, ?4, ?5)
                    ON CONFLICT (name) DO UPDATE SET last_tick = ?2, last_enqueued_at = ?3, last_key = ?4, next_tick = ?5
                    """,
                arguments: [name, tick.timeIntervalSince1970, Date().timeIntervalSince1970, task.key, next?.timeIntervalSince1970]
            )
            return stored.map(TaskTickRecord.enqueued) ?? .keyStillStored
        }
    }

    func schedules() async throws -> [TaskScheduleState] {
        try await Self.run("read the schedules") {
            try await pool.read { db in
                try Row.fetchAll(db, sql: """
                    SELECT name, recurrence, last_tick, last_enqueued_at, last_key, next_tick FROM taskbroker_schedule ORDER BY name
                    """).map { row in
                    TaskScheduleState(
                        name: row["name"], recurrence: row["recurrence"],
                        lastTick: (row["last_tick"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        lastEnqueuedAt: (row["last_enqueued_at"] as Double?).map(Date.init(timeIntervalSince1970:)),
                        lastKey: row["last_key"],
                        nextTick: (row["next_tick"] as Double?).map(Date.init(timeIntervalSince1970:))
                    )
                }
            }
        }
    }
}
