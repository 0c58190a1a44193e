import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TaskBroker
import TaskBrokerConsole
import Testing

/// With an access token, every route asks for it: as a bearer token, or through the login form's cookie.
@Suite struct ConsoleAccessTests {
    static let token = "s3cret-token"

    @Test func everyRouteAsksForTheToken() async throws {
        let fixture = try await ConsoleFixture(configuration: .init(accessToken: Self.token))
        defer { fixture.remove() }
        try await fixture.database.save(Note(key: "n", queueName: "q", text: "x"))
        try await fixture.withClient { client in
            for uri in ["/", "/queue?name=q", "/action?key=n&collection=notes", "/dead-letters", "/schedules"] {
                let anonymous = try await client.get(uri)
                #expect(anonymous.status == .unauthorized, "\(uri)")
                #expect(anonymous.text.contains("Sign in"))
                #expect(!anonymous.text.contains("csrf"), "\(uri) leaks no form token")
                let wrong = try await client.get(uri, headers: [.authorization: "Bearer not-it"])
                #expect(wrong.status == .unauthorized, "\(uri)")
                let right = try await client.get(uri, headers: [.authorization: "Bearer \(Self.token)"])
                #expect(right.status == .ok, "\(uri)")
            }
            for command in ["pause", "resume", "purge", "replay", "discard", "delete"] {
                let anonymous = try await client.post("/\(command)", [("queue", "q"), ("key", "n"), ("collection", "notes")])
                #expect(anonymous.status == .unauthorized, "\(command)")
            }
            #expect(try await fixture.database.snapshot().first?.pending == 1)
        }
    }

    @Test func theLoginFormSetsACookieThatOpensTheConsole() async throws {
        let fixture = try await ConsoleFixture(configuration: .init(accessToken: Self.token))
        defer { fixture.remove() }
        try await fixture.withClient { client in
            let failed = try await client.post("/login", [("token", "guess")])
            #expect(failed.status == .unauthorized)
            #expect(failed.headers[.setCookie] == nil)
            let signedIn = try await client.post("/login", [("token", Self.token)])
            #expect(signedIn.status == .seeOther)
            let cookie = try #require(signedIn.headers[.setCookie])
            #expect(cookie.contains("HttpOnly"))
            #expect(cookie.contains("SameSite=Strict"))
            #expect(!cookie.contains(Self.token), "the cookie carries a session, not the token")
            let session = String(cookie.prefix { $0 != ";" })
            let page = try await client.get("/", headers: [.cookie: session])
            #expect(page.status == .ok)
            let forged = try await client.get("/", headers: [.cookie: "taskbroker_console=" + String(repeating: "0", count: 64)])
            #expect(forged.status == .unauthorized)
            // Signing out clears the cookie.
            let token = try #require(csrfToken(in: page.text))
            let out = try await client.post("/logout", [("csrf", token)], headers: [.cookie: session])
            #expect(out.status == .seeOther)
            #expect(out.headers[.setCookie]?.contains("Max-Age=0") == true)
        }
    }
}
