import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TaskBroker
import TaskBrokerConsole
import Testing

/// The README's example: the console mounted under a path of the application's, behind the
/// application's own middleware.
@Suite struct ReadmeExampleTests {
    /// The application's own access check (here: a header).
    struct AdminOnly<Context: RequestContext>: RouterMiddleware {
        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            guard request.headers[HTTPField.Name("X-Admin")!] == "yes" else { throw HTTPError(.forbidden) }
            return try await next(request, context)
        }
    }

    @Test func theConsoleMountedUnderAnApplicationsPathAndMiddleware() async throws {
        let fixture = try await ConsoleFixture()
        defer { fixture.remove() }
        try await fixture.database.save(Note(key: "n", queueName: "mail", text: "x"))

        // README: "Mounting the console in your application"
        let router = Router()
        let console = TaskBrokerConsole(database: fixture.database, configuration: .init(basePath: "/admin/jobs"))
        console.addRoutes(to: router.group("admin/jobs").add(middleware: AdminOnly()))
        let app = Application(router: router)

        try await app.test(.router) { client in
            let admin: HTTPFields = [HTTPField.Name("X-Admin")!: "yes"]
            #expect(try await client.get("/admin/jobs", headers: admin).status == .ok)
            let page = try await client.get("/admin/jobs/", headers: admin)
            #expect(page.status == .ok)
            #expect(page.text.contains("href=\"/admin/jobs/queue?name=mail\""))
            #expect(page.text.contains("action=\"/admin/jobs/pause\""))
            #expect(try await client.get("/admin/jobs", headers: [:]).status == .forbidden)
            let token = try #require(csrfToken(in: page.text))
            let paused = try await client.post("/admin/jobs/pause", [("csrf", token), ("queue", "mail")], headers: admin)
            #expect(paused.status == .seeOther)
            #expect(paused.headers[.location] == "/admin/jobs/queue?name=mail")
            #expect(try await fixture.database.snapshot().first?.pausedByOperator == true)
        }
    }
}
