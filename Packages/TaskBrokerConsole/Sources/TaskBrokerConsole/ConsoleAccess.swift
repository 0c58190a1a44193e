import Foundation
import HTTPTypes
import Hummingbird
import TaskBroker

/// The console's secrets, random for each console: the CSRF token its forms carry, and the value
/// of the cookie its login form sets.
struct ConsoleSecrets: Sendable {
    let csrfToken: String
    let session: String

    init() {
        csrfToken = Self.random()
        session = Self.random()
    }

    /// 32 random bytes from the system's generator, as hex.
    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in
            let byte = UInt8.random(in: .min ... .max, using: &generator)
            return (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }.joined()
    }
}

/// Who may use the console, and the checks every route makes: the access token (when configured),
/// the CSRF token of commands, and the errors that become pages.
struct ConsoleAccess: Sendable {
    let console: TaskBrokerConsole

    /// The name of the cookie that the login form sets.
    static let cookieName = "taskbroker_console"
    /// The largest form body a command or the login takes.
    static let maxFormBytes = 16_384

    /// A page: checked for access, its errors shown as pages.
    func page(_ request: Request, _ body: () async throws -> String) async throws -> Response {
        await respond {
            try checkAccess(request)
            return HTML.response(try await body())
        }
    }

    /// A stream (the live counts): checked for access; an error before it starts is a page.
    func stream(_ request: Request, _ body: () async throws -> Response) async throws -> Response {
        await respond {
            try checkAccess(request)
            return try await body()
        }
    }

    /// A command (`POST`): checked for access and for the CSRF token of its form, then run; a
    /// 303 to the page it names.
    func command(_ request: Request, _ run: (ConsoleForm) async throws -> String) async throws -> Response {
        await respond {
            try checkAccess(request)
            let form = try await ConsoleForm(request)
            try checkCSRF(form, request)
            let next = try await run(form)
            return Response(status: .seeOther, headers: [.location: next, .cacheControl: "no-store"])
        }
    }

    /// The login form (only useful with an access token).
    func loginPage(_ request: Request, failed: Bool = false) -> Response {
        guard console.configuration.accessToken != nil else {
            return HTML.response(HTML.page(title: "Sign in", console: console, body: "<p>This console asks for no token.</p>", signedIn: false))
        }
        let body = """
            \(failed ? "<p class=\"bad\">That token is not the console's.</p>" : "")
            <form method="post" action="\(HTML.escape(console.link("login")))">
            <label>Access token <input type="password" name="token" autocomplete="current-password" autofocus></label>
            <button type="submit">Sign in</button>
            </form>
            """
        return HTML.response(HTML.page(title: "Sign in", console: console, body: body, signedIn: false), status: failed ? .unauthorized : .ok)
    }

    /// Checks the token typed into the login form; sets the session cookie when it is right.
    func login(_ request: Request) async throws -> Response {
        await respond {
            guard let token = console.configuration.accessToken else {
                return Response(status: .seeOther, headers: [.location: console.link("")])
            }
            let form = try await ConsoleForm(request)
            guard let typed = form["token"], Self.same(typed, token) else { return loginPage(request, failed: true) }
            var response = Response(status: .seeOther, headers: [.location: console.link(""), .cacheControl: "no-store"])
            response.setCookie(Cookie(
                name: Self.cookieName, value: console.secrets.session, path: cookiePath, httpOnly: true, sameSite: .strict
            ))
            return response
        }
    }

    /// Ends the session: the cookie is cleared.
    func logout(_ request: Request) async throws -> Response {
        await respond {
            let form = try await ConsoleForm(request)
            try checkCSRF(form, request)
            var response = Response(status: .seeOther, headers: [.location: console.link("login")])
            response.setCookie(Cookie(name: Self.cookieName, value: "", maxAge: 0, path: cookiePath, httpOnly: true, sameSite: .strict))
            return response
        }
    }

    private var cookiePath: String { console.configuration.basePath.isEmpty ? "/" : console.configuration.basePath }

    /// Without an access token configured, everyone may; with one, the request carries it as a
    /// bearer token or carries the session cookie.
    private func checkAccess(_ request: Request) throws {
        guard let token = console.configuration.accessToken else { return }
        if let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer "),
           Self.same(String(authorization.dropFirst("Bearer ".count)), token) {
            return
        }
        if let cookie = request.cookies[Self.cookieName], Self.same(cookie.value, console.secrets.session) { return }
        throw ConsoleError.unauthorized(loginLink: console.link("login"))
    }

    /// A command's form carries the console's CSRF token, and a browser that says the request
    /// comes from another site is refused.
    private func checkCSRF(_ form: ConsoleForm, _ request: Request) throws {
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!], site == "cross-site" {
            throw ConsoleError.forbidden("The request came from another site.")
        }
        guard let token = form["csrf"], Self.same(token, console.secrets.csrfToken) else {
            throw ConsoleError.forbidden("The form's CSRF token is missing or not this console's: load the page again and retry.")
        }
    }

    /// Compares two secrets in time that does not depend on where they differ.
    static func same(_ a: String, _ b: String) -> Bool {
        let left = Array(a.utf8), right = Array(b.utf8)
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
    }

    /// Runs `body`; a console error becomes its page, a TaskBroker error a 503 that says what failed.
    private func respond(_ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let error as ConsoleError {
            return error.response(console)
        } catch let error as any HTTPResponseError {
            // Hummingbird's own, from reading the request (a body over the limit, say).
            let message = (error as? HTTPError)?.body
                ?? (error.status == .contentTooLarge ? "The form is larger than \(ConsoleAccess.maxFormBytes) bytes." : error.status.reasonPhrase)
            return ConsoleError(status: error.status, message: message).response(console)
        } catch {
            return ConsoleError(status: .serviceUnavailable, message: "The database did not answer: \(error)").response(console)
        }
    }
}

/// A command's or the login's form fields (`application/x-www-form-urlencoded`).
struct ConsoleForm: Sendable {
    private let fields: [String: String]

    init(_ request: Request) async throws {
        let buffer = try await request.body.collect(upTo: ConsoleAccess.maxFormBytes)
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decoded(parts[0]) else { throw ConsoleError.badRequest("The form is not URL-encoded.") }
            let value = parts.count > 1 ? Self.decoded(parts[1]) : ""
            guard let value else { throw ConsoleError.badRequest("The form's field \"\(name)\" is not URL-encoded.") }
            fields[name] = value
        }
        self.fields = fields
    }

    private static func decoded(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    subscript(_ name: String) -> String? { fields[name] }

    /// A field that must be there and not be empty.
    func required(_ name: String) throws -> String {
        guard let value = fields[name], !value.isEmpty else { throw ConsoleError.badRequest("The form has no \"\(name)\".") }
        return value
    }
}

/// What went wrong with a request, as the page the user sees.
struct ConsoleError: Error, Sendable {
    var status: HTTPResponse.Status
    var message: String
    var loginLink: String?

    init(status: HTTPResponse.Status, message: String, loginLink: String? = nil) {
        self.status = status
        self.message = message
        self.loginLink = loginLink
    }

    static func badRequest(_ message: String) -> Self { Self(status: .badRequest, message: message) }
    static func notFound(_ message: String) -> Self { Self(status: .notFound, message: message) }
    static func forbidden(_ message: String) -> Self { Self(status: .forbidden, message: message) }
    static func unauthorized(loginLink: String) -> Self {
        Self(status: .unauthorized, message: "This console asks for its access token.", loginLink: loginLink)
    }

    func response(_ console: TaskBrokerConsole, headers: HTTPFields = [:]) -> Response {
        var body = "<p class=\"bad\">\(HTML.escape(message))</p>"
        if let loginLink { body += "<p><a href=\"\(HTML.escape(loginLink))\">Sign in</a></p>" }
        var headers = headers
        if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        return HTML.response(
            HTML.page(title: "\(status.code) \(status.reasonPhrase)", console: console, body: body, signedIn: false), status: status, headers: headers
        )
    }
}
