import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TaskBroker
@testable import TaskBrokerConsole
import Testing

/// The live counts: what the event stream sends, and what the pages give the script to update.
/// (`Integration`'s `QueuekitServeTests` reads the stream itself over HTTP, across processes.)
@Suite struct ConsoleLiveTests {
    @Test func anEventCarriesTheTotalsAndEachQueuesCountsAsOneDataLine() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        let hostile = "q\n\ndata: {\"forged\":1}\n</script>"
        try await fixture.database.save([
            Note(key: "a", queueName: hostile, text: "x"), Note(key: "b", queueName: hostile, text: "y"), Note(key: "c", queueName: "plain", text: "z"),
        ])
        try await fixture.database.pauseQueues(["plain"])
        try await fixture.deadLetter(Note(key: "d", queueName: "dead", text: "w"), reason: "no")
        let event = String(buffer: try await ConsoleLive(console: fixture.console).event())
        let lines = event.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 4 && lines[0] == "event: counts" && lines[2].isEmpty && lines[3].isEmpty, "one event of one data line: \(event)")
        let json = try #require(lines[1].hasPrefix("data: ") ? lines[1].dropFirst("data: ".count) : nil)
        let counts = try JSONDecoder().decode(ConsoleLive.Counts.self, from: Data(json.utf8))
        #expect(counts.queues == 3 && counts.pending == 3 && counts.deadLetters == 1 && counts.paused == 1)
        #expect(counts.rows[hostile] == .init(pending: 2, parallel: 0, deadLetters: 0, failures: 0, state: "ready", stateKind: "ready"))
        #expect(counts.rows["plain"]?.state == "paused by an operator" && counts.rows["plain"]?.stateKind == "operator")
        #expect(counts.rows["dead"]?.deadLetters == 1)
    }

    @Test func pagesMarkWhatTheLiveCountsUpdateAndLoadOnlyTheConsolesScript() async throws {
        let fixture = try await ConsoleFixture(configuration: .init(basePath: "/ops"))
        defer { fixture.remove() }
        try await fixture.database.save(Note(key: "a", queueName: "q\"<x>", text: "x"))
        let router = Router()
        fixture.console.addRoutes(to: router.group("ops"))
        try await Application(router: router).test(.router) { client in
            let page = try await client.get("/ops/")
            #expect(page.text.contains("data-events=\"/ops/events\""))
            #expect(page.text.contains("<script src=\"/ops/console.js\" defer></script>"))
            #expect(page.text.components(separatedBy: "<script").count == 2, "one script element, the console's")
            #expect(page.text.contains("<tr data-queue=\"q&quot;&lt;x&gt;\">"))
            #expect(page.text.contains("<span data-field=\"pending\">1</span>"))
            #expect(page.text.contains("<span data-total=\"pending\">1</span>"))
            let csp = try #require(page.headers[HTTPField.Name("Content-Security-Policy")!])
            #expect(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline'; script") && !csp.contains("script-src 'unsafe"))
            let script = try await client.get("/ops/console.js")
            #expect(script.status == .ok)
            #expect(script.headers[.contentType] == "text/javascript; charset=utf-8")
            #expect(script.text.contains("new EventSource(url)"))
            #expect(!script.text.contains("innerHTML"), "counts are written as text, never as markup")
        }
    }

    @Test func theEventStreamAsksForTheTokenToo() async throws {
        let fixture = try await ConsoleFixture(configuration: .init(accessToken: "a-token-of-sixteen+"))
        defer { fixture.remove() }
        try await fixture.withClient { client in
            let stream = try await client.get("/events")
            #expect(stream.status == .unauthorized)
        }
    }
}
