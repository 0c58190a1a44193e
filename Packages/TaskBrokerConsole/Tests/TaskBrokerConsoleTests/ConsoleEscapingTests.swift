import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TaskBroker
import TaskBrokerConsole
import Testing

/// Queue names, keys, reasons and payloads are the application's (or an attacker's) text: every
/// page shows them escaped.
@Suite struct ConsoleEscapingTests {
    static let hostile = "<script>alert('x')</script>\"><img src=x onerror=alert(1)>&amp;"

    @Test func hostileNamesKeysReasonsAndPayloadsAreEscapedOnEveryPage() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        let queue = "q" + Self.hostile
        let megabyte = String(repeating: Self.hostile, count: 1_048_576 / Self.hostile.count + 1)
        try await fixture.database.save(Note(key: "k" + Self.hostile, collection: "c" + Self.hostile, queueName: queue, text: megabyte))
        try await fixture.deadLetter(Note(key: "d" + Self.hostile, queueName: queue, text: Self.hostile), reason: "r" + Self.hostile)
        try await fixture.database.storage.registerSchedules([TaskScheduleState(name: "s" + Self.hostile, recurrence: Self.hostile)])
        let pages = [
            "/",
            "/queue?name=\(formEncoded(queue))",
            "/action?key=\(formEncoded("k" + Self.hostile))&collection=\(formEncoded("c" + Self.hostile))",
            "/action?key=\(formEncoded("k" + Self.hostile))&collection=\(formEncoded("c" + Self.hostile))&full=1",
            "/action?key=\(formEncoded("d" + Self.hostile))&collection=notes",
            "/dead-letters",
            "/dead-letters?queue=\(formEncoded(queue))",
            "/schedules",
            "/action?key=\(formEncoded(Self.hostile))&collection=\(formEncoded(Self.hostile))",
        ]
        try await fixture.withClient { client in
            for uri in pages {
                let page = try await client.get(uri)
                #expect(page.status == .ok || page.status == .notFound, "\(uri)")
                let text = page.text
                #expect(!text.contains("<script>"), "\(uri) shows a raw <script>")
                #expect(text.components(separatedBy: "<script").count == 2, "\(uri): the console's own script only")
                #expect(
                    text.components(separatedBy: "<img").count == text.components(separatedBy: "<img src=\"/charts/").count,
                    "\(uri) shows a raw <img> (only the console's charts are images)"
                )
                #expect(!text.contains("'x'"), "\(uri) shows a raw quote")
                #expect(text.contains("&lt;script&gt;"), "\(uri) shows the hostile text, escaped")
                #expect(page.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("default-src 'none'") == true)
            }
            // The whole megabyte, escaped, on the action's full page.
            let full = try await client.get(pages[3])
            #expect(full.text.count > 1_048_576)
        }
    }
}
