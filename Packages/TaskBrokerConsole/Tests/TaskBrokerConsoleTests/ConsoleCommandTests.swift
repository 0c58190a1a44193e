import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TaskBroker
import TaskBrokerConsole
import Testing

/// The operator's commands change the database, and only with the page's CSRF token.
@Suite struct ConsoleCommandTests {
    @Test func pauseAndResumeAQueueFromItsPage() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.database.save(Note(key: "n", queueName: "q", text: "x"))
        try await fixture.withClient { client in
            let page = try await client.get("/queue?name=q")
            let token = try #require(csrfToken(in: page.text))
            let paused = try await client.post("/pause", [("csrf", token), ("queue", "q")])
            #expect(paused.status == .seeOther)
            #expect(paused.headers[.location] == "/queue?name=q")
            #expect(try await fixture.database.snapshot().first?.pausedByOperator == true)
            #expect(try await client.get("/queue?name=q").text.contains("paused by an operator"))
            let resumed = try await client.post("/resume", [("csrf", token), ("queue", "q")])
            #expect(resumed.status == .seeOther)
            #expect(try await fixture.database.snapshot().first?.pausedByOperator == false)
        }
    }

    @Test func replayAndDiscardDeadLetters() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.deadLetter(Note(key: "again", queueName: "q", text: "x"), reason: "down")
        try await fixture.deadLetter(Note(key: "gone", queueName: "q", text: "y"), reason: "down")
        try await fixture.withClient { client in
            let token = try #require(csrfToken(in: try await client.get("/dead-letters").text))
            let replayed = try await client.post("/replay", [("csrf", token), ("key", "again"), ("collection", "notes")])
            #expect(replayed.status == .seeOther)
            #expect(try await fixture.database.lookup(key: "again", collection: "notes").map(Self.isLive) == true)
            let discarded = try await client.post("/discard", [("csrf", token), ("key", "gone"), ("collection", "notes")])
            #expect(discarded.status == .seeOther)
            #expect(try await fixture.database.lookup(key: "gone", collection: "notes") == nil)
            // Twice: the second finds nothing, and says so.
            let again = try await client.post("/discard", [("csrf", token), ("key", "gone"), ("collection", "notes")])
            #expect(again.status == .notFound)
            #expect(again.text.contains("No dead letter with key"))
        }
    }

    @Test func deleteAnActionAndPurgeAQueue() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.database.save((1...3).map { Note(key: "n\($0)", queueName: "q", text: "x") } + [Note(key: "other", queueName: "r", text: "x")])
        try await fixture.withClient { client in
            let token = try #require(csrfToken(in: try await client.get("/queue?name=q").text))
            #expect(try await client.post("/delete", [("csrf", token), ("key", "n1"), ("collection", "notes")]).status == .seeOther)
            #expect(try await fixture.database.lookup(key: "n1", collection: "notes") == nil)
            #expect(try await client.post("/purge", [("csrf", token), ("queue", "q")]).status == .seeOther)
            let queues = try await fixture.database.snapshot()
            #expect(queues.map(\.name) == ["r"], "only the other queue is left: \(queues)")
        }
    }

    @Test func aCommandWithoutTheConsolesCSRFTokenChangesNothing() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.database.save(Note(key: "n", queueName: "q", text: "x"))
        try await fixture.withClient { client in
            let token = try #require(csrfToken(in: try await client.get("/").text))
            let forged: [[(String, String)]] = [
                [("queue", "q")],
                [("csrf", ""), ("queue", "q")],
                [("csrf", String(repeating: "0", count: token.count)), ("queue", "q")],
                [("csrf", token + "0"), ("queue", "q")],
            ]
            for fields in forged {
                let response = try await client.post("/purge", fields)
                #expect(response.status == .forbidden)
                #expect(response.text.contains("CSRF token"))
            }
            let crossSite = try await client.post("/purge", [("csrf", token), ("queue", "q")], headers: [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"])
            #expect(crossSite.status == .forbidden)
            #expect(try await fixture.database.snapshot().first?.pending == 1, "nothing was purged")
            // Commands are POST only.
            let typed = try await client.get("/purge?queue=q&csrf=\(token)")
            #expect(typed.status == .methodNotAllowed)
            #expect(typed.headers[.allow] == "POST")
            #expect(try await fixture.database.snapshot().first?.pending == 1)
        }
    }

    @Test func aCommandWithBadInputGetsA4xx() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.database.save(Note(key: "n", queueName: "q", text: "x"))
        try await fixture.withClient { client in
            let token = try #require(csrfToken(in: try await client.get("/").text))
            let missing = try await client.post("/replay", [("csrf", token), ("key", "k")])
            #expect(missing.status == .badRequest)
            #expect(missing.text.contains("has no &quot;collection&quot;"))
            let notEncoded = try await client.execute(
                uri: "/pause", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                body: ByteBuffer(string: "csrf=\(token)&queue=%ZZ")
            )
            #expect(notEncoded.status == .badRequest)
            let huge = try await client.post("/pause", [("csrf", token), ("queue", String(repeating: "q", count: 100_000))])
            #expect(huge.status == .contentTooLarge)
        }
    }

    private static func isLive(_ lookup: TaskLookup) -> Bool {
        if case .live = lookup { true } else { false }
    }
}
