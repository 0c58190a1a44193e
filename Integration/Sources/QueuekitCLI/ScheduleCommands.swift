import ArgumentParser
import Foundation
import TaskBroker

/// `queuekit schedules`: the schedules stored in the database, with their last and next ticks.
struct Schedules: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the schedules stored in the database: recurrence, last tick, when it was enqueued, its action's key, next tick."
    )

    @OptionGroup var options: DatabaseOptions

    @Flag(help: "Machine-readable output: one JSON document on stdout.")
    var json = false

    struct Row: Codable {
        var name: String
        var recurrence: String
        var lastTick: Date?
        var lastEnqueuedAt: Date?
        var lastKey: String?
        var nextTick: Date?
    }

    func run() async throws {
        let store = try await options.open(create: false, readOnly: true)
        let schedules = try await store.database.schedules()
        if json {
            return try OutputOptions(json: true, full: false).print(schedules.map {
                Row(name: $0.name, recurrence: $0.recurrence, lastTick: $0.lastTick, lastEnqueuedAt: $0.lastEnqueuedAt, lastKey: $0.lastKey, nextTick: $0.nextTick)
            })
        }
        guard !schedules.isEmpty else { return say("no schedules") }
        let format = ISO8601DateFormatter()
        for schedule in schedules {
            let last = schedule.lastTick.map { "last tick \(format.string(from: $0))" + (schedule.lastKey.map { " (\($0))" } ?? "") } ?? "no tick yet"
            let next = schedule.nextTick.map { "next \(format.string(from: $0))" } ?? "no next tick"
            say("\(schedule.name)  \(schedule.recurrence)  \(last)  \(next)")
        }
    }
}
