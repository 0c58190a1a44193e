import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TaskBroker
import TaskBrokerConsole
import Testing

/// The console's pages show what the database holds.
@Suite struct ConsolePageTests {
    @Test func theQueuesPageListsEveryQueueWithItsCounts() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.database.save([
            Note(key: "a1", queueName: "mail-alice", text: "hello"),
            Note(key: "a2", queueName: "mail-alice", text: "again"),
            Note(key: "b1", queueName: "mail-bob", text: "hi"),
        ])
        try await fixture.deadLetter(Note(key: "c1", queueName: "mail-carol", text: "bounced"), reason: "mailbox full")
        try await fixture.database.pauseQueues(["mail-bob"])
        try await fixture.withClient { client in
            let page = try await client.get("/")
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            let text = page.text
            #expect(page.plainText.contains("3 queue(s), 3 pending, 0 plain parallel pending, 1 dead letter(s), 1 paused by an operator."))
            #expect(text.contains("<tr data-queue=\"mail-alice\"><td><a href=\"/queue?name=mail-alice\"><code>mail-alice</code></a></td><td><span data-field=\"pending\">2</span></td>"))
            #expect(text.contains("<tr data-queue=\"mail-bob\">"))
            #expect(text.contains("data-state=\"operator\">paused by an operator</span>"), "marked bold by the page's style")
            #expect(text.contains("href=\"/dead-letters?queue=mail-carol\"><span data-field=\"deadLetters\">1</span></a>"))
            // The paused queue offers Resume, the others Pause.
            #expect(text.components(separatedBy: ">Resume</button>").count == 2)
            #expect(text.components(separatedBy: ">Pause</button>").count == 3)
        }
    }

    @Test func aQueuePageListsItsActionsInOrderAPageAtATime() async throws {
        let fixture = try await ConsoleFixture(configuration: .init(pageSize: 2))
        defer { fixture.remove() }
        try await fixture.database.save((1...5).map { Note(key: "n\($0)", queueName: "q", text: "note \($0)") })
        try await fixture.withClient { client in
            let first = try await client.get("/queue?name=q")
            #expect(first.status == .ok)
            #expect(first.plainText.contains("5 pending"))
            let keys = Self.keys(in: first.text)
            #expect(keys == ["n1", "n2"])
            let next = try #require(Self.nextLink(in: first.text))
            let second = try await client.get(next)
            #expect(Self.keys(in: second.text) == ["n3", "n4"])
            let third = try await client.get(try #require(Self.nextLink(in: second.text)))
            #expect(Self.keys(in: third.text) == ["n5"])
            #expect(Self.nextLink(in: third.text) == nil)
        }
    }

    @Test func anActionPageShowsItsPayloadPrettyPrintedAndItsFailure() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.deadLetter(Note(key: "k", queueName: "q", text: "body"), reason: "smtp said no")
        try await fixture.withClient { client in
            let page = try await client.get("/action?key=k&collection=notes")
            #expect(page.status == .ok)
            #expect(page.text.contains("dead letter"))
            #expect(page.text.contains("smtp said no"))
            #expect(page.text.contains("&quot;text&quot; : &quot;body&quot;"), "pretty-printed JSON, escaped: \(page.text)")
            #expect(page.text.contains(">Replay</button>"))
            #expect(page.text.contains(">Discard</button>"))
        }
    }

    @Test func aLongPayloadIsCutUntilAskedForWhole() async throws {
        let fixture = try await ConsoleFixture(configuration: .init(payloadLimit: 1_000))
        defer { fixture.remove() }
        let long = String(repeating: "x", count: 5_000)
        try await fixture.database.save(Note(key: "long", queueName: "q", text: long))
        try await fixture.withClient { client in
            let cut = try await client.get("/action?key=long&collection=notes")
            #expect(!cut.text.contains(long))
            #expect(cut.text.contains("Show all"))
            let whole = try await client.get("/action?key=long&collection=notes&full=1")
            #expect(whole.text.contains(long))
            #expect(!whole.text.contains("Show all"))
        }
    }

    @Test func theDeadLettersPageListsThemWithTheirReasons() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.deadLetter(Note(key: "d1", queueName: "qa", text: "one"), reason: "first reason")
        try await fixture.deadLetter(Note(key: "d2", queueName: "qb", text: "two"), reason: "second reason")
        try await fixture.withClient { client in
            let all = try await client.get("/dead-letters")
            #expect(all.text.contains("2 dead letter(s)"))
            #expect(all.text.contains("first reason") && all.text.contains("second reason"))
            let one = try await client.get("/dead-letters?queue=qb")
            #expect(one.text.contains("1 dead letter(s) in <code>qb</code>"))
            #expect(!one.text.contains("first reason"))
        }
    }

    @Test func theSchedulesPageListsRegisteredSchedules() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.database.storage.registerSchedules([TaskScheduleState(name: "nightly-report", recurrence: "cron 0 3 * * * (UTC)")])
        try await fixture.withClient { client in
            let page = try await client.get("/schedules")
            #expect(page.status == .ok)
            #expect(page.text.contains("nightly-report"))
            #expect(page.text.contains("cron 0 3 * * * (UTC)"))
        }
    }

    @Test func theRateLimitsPageListsTheStartsEachBucketCounts() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        let empty = try await fixture.withClient { client in try await client.get("/rate-limits") }
        #expect(empty.status == .ok && empty.text.contains("No start counts against a rate limit now."))
        // A broker with a limit on its mail queues runs two actions: two starts in the bucket.
        let limit = try TaskRateLimit(prefix: "mail-", starts: 10, per: .seconds(3_600))
        var configuration = TaskQueueBroker.Configuration()
        configuration.rateLimits = [limit]
        let broker = try await TaskQueueBroker.setup(
            database: fixture.database, name: "mail-", handler: SucceedingHandler(), configuration: configuration
        )
        let events = broker.events
        try await fixture.database.save([Note(key: "a", queueName: "mail-1", text: "x"), Note(key: "b", queueName: "mail-2", text: "y")])
        var succeeded = 0
        for await event in events {
            if case .succeeded = event { succeeded += 1 }
            if succeeded == 2 { break }
        }
        await broker.shutdown()
        let page = try await fixture.withClient { client in try await client.get("/rate-limits") }
        #expect(page.status == .ok)
        #expect(page.plainText.contains("queues of prefixmail-2"), "the bucket of prefix mail- with its two starts: \(page.plainText)")
        #expect(page.plainText.contains("in 59m") || page.plainText.contains("in 1h00m"), "empty an hour after the starts: \(page.plainText)")
    }

    @Test func theWorkersPageOfAnSQLiteFileSaysItsBrokersHoldNoLeases() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        let page = try await fixture.withClient { client in try await client.get("/workers") }
        #expect(page.status == .ok)
        #expect(page.text.contains("hold no leases to list"))
        #expect(page.text.contains("href=\"/workers\"") && page.text.contains("href=\"/rate-limits\""), "both pages are in the navigation")
    }

    @Test func badInputGetsAClear4xxNeverA500() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.withClient { client in
            let cases: [(String, HTTPResponse.Status, String)] = [
                ("/queue", .badRequest, "needs &quot;name&quot;"),
                ("/queue?name=", .badRequest, "needs &quot;name&quot;"),
                ("/queue?name=q&after=soon", .badRequest, "must be a whole number"),
                ("/action?key=k", .badRequest, "needs &quot;collection&quot;"),
                ("/action?key=missing&collection=notes", .notFound, "No action with key"),
                ("/action?key=%FF%FE&collection=notes", .notFound, "No action with key"),
                ("/no-such-page", .notFound, ""),
            ]
            for (uri, status, message) in cases {
                let response = try await client.get(uri)
                #expect(response.status == status, "\(uri): \(response.status)")
                #expect(message.isEmpty || response.text.contains(message), "\(uri): \(response.text)")
            }
        }
    }

    /// The action keys a page lists, in order.
    private static func keys(in page: String) -> [String] {
        page.components(separatedBy: "href=\"/action?key=").dropFirst().map { String($0.prefix { $0 != "&" }) }
    }

    /// The page's link to its next page, if any, unescaped.
    private static func nextLink(in page: String) -> String? {
        guard let end = page.range(of: "\">Next actions</a>") else { return nil }
        let start = page[..<end.lowerBound].range(of: "href=\"", options: .backwards)
        return start.map { String(page[$0.upperBound..<end.lowerBound]).replacingOccurrences(of: "&amp;", with: "&") }
    }
}
