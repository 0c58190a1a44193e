import AsyncPrimitivesTesting
import Foundation
import TaskBroker
import Testing

// The README's example, kept compiling and true (its types are in Support/ReadmeExample.swift).

@Suite(.timeLimit(.minutes(3)))
struct ReadmeExampleTests {
    @Test func readmeExampleSendsTheMessage() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("tasks.sqlite")
        let handler = MessageHandler()

        let database = try await TaskDatabase.sqlite(path: path)
        let broker = try await TaskQueueBroker.setup(database: database, name: "handler1", handler: handler)
        try await database.save(MessageSendAction(
            key: "m1", collection: "messages", messageToSendKey: "message-42",
            queueName: broker.queueName(withSuffix: "queue2"), date: Date()
        ))

        #expect(await handler.sent.values(count: 1) == ["message-42"])
        await broker.shutdown()
    }

    /// The job-system example, as the README shows it, plus what it promises.
    @Test func readmeJobSystemExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let handler = MailHandler()

        var configuration = TaskQueueBroker.Configuration()
        configuration.maxAttempts = 5
        configuration.actionTimeout = .seconds(30)
        let broker = try await TaskQueueBroker.setup(database: database, name: "mail", handler: handler, configuration: configuration)

        try await database.save(MailAction(key: "reminder-42", queueName: "mail-42", address: "ann@example.com"),
                                notBefore: Date().addingTimeInterval(3_600))
        try await database.save(MailAction(key: "reset-42", queueName: "mail-42-reset", address: "ann@example.com"),
                                priority: 10)
        let stored = try await database.saveIfAbsent(MailAction(key: "welcome-42", queueName: "mail-42", address: "ann@example.com"))
        try await database.saveParallel((1...3).map { MailAction(key: "news-\($0)", queueName: "mail-news",
                                                                address: "reader\($0)@example.com") })
        try await database.pauseQueues(["mail-42"])
        try await database.resumeQueues(["mail-42"])
        #expect(stored)
        #expect(try await database.saveIfAbsent(MailAction(key: "welcome-42", queueName: "mail-42", address: "ann@example.com")) == false)

        // A bad address is a dead letter at once; other queues go on.
        try await database.save(MailAction(key: "bad-1", queueName: "mail-7", address: "nowhere"))
        try await database.save(MailAction(key: "ok-1", queueName: "mail-7", address: "bob@example.com"))
        #expect(Set(await handler.sent.values(count: 5)) == ["reset-42", "ok-1", "news-1", "news-2", "news-3"],
                "the reminder waits an hour, and the welcome behind it; the three news run side by side")
        for letter in try await database.deadLetters() {
            #expect(letter.key == "bad-1" && letter.reason == "no such address: nowhere" && letter.attempts == 1)
            #expect(try await database.replayDeadLetter(key: letter.key, collection: letter.collection))
        }
        await broker.shutdown()
    }

    /// The schedules example, as the README shows it, on a manual clock from 02:59:30 in Paris:
    /// the digest ticks at 03:00 and its action runs.
    @Test func readmeScheduleExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        let handler = MailHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "mail", handler: handler)

        let digest = try TaskSchedule("nightly-digest", .cron("0 3 * * *", timeZoneIdentifier: "Europe/Paris")) { tick in
            MailAction(key: tick.key, queueName: "mail-digest", address: "team@example.com")
        }
        let cleanup = try TaskSchedule("cleanup", .every(.seconds(300)), missedTicks: .skip) { _ in
            MailAction(key: "cleanup", queueName: "mail-cleanup", address: "ops@example.com")
        }
        // 2026-11-28 02:59:30 in Paris (UTC+1).
        let run = try SchedulerRun(database: database, schedules: [digest, cleanup], start: Date(timeIntervalSince1970: 1_795_831_170))
        await run.advance(by: .seconds(30))
        #expect(await run.events.values(count: 2).count == 2)
        #expect(Set(await handler.sent.values(count: 2)) == ["nightly-digest@2026-11-28T02:00:00Z", "cleanup"])
        await run.stop()
        await broker.shutdown()
    }

    /// The rate-limits example, as the README shows it: ten e-mails start at once.
    @Test func readmeRateLimitExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let database = try await TaskDatabase.sqlite(path: directory.path("tasks.sqlite"))
        var configuration = TaskQueueBroker.Configuration()
        configuration.rateLimits = [
            try TaskRateLimit(prefix: "mail-", starts: 10, per: .seconds(1)),
            try TaskRateLimit(prefix: "api-", starts: 1, per: .seconds(2), scope: .eachQueue),
        ]
        let handler = MailHandler()
        let broker = try await TaskQueueBroker.setup(database: database, name: "mail", handler: handler,
                                                     configuration: configuration)
        try await database.save((1...10).map { MailAction(key: "m\($0)", queueName: "mail-\($0)", address: "u\($0)@example.com") })
        #expect(Set(await handler.sent.values(count: 10)) == Set((1...10).map { "m\($0)" }))
        await broker.shutdown()
    }
}
