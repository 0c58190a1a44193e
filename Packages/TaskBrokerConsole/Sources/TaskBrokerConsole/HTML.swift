import Foundation
import HTTPTypes
import Hummingbird

/// Building the console's pages: escaping, the layout, and formatting of values.
enum HTML {
    /// `text` with every character that means something in HTML (text or a quoted attribute)
    /// replaced by its entity.
    static func escape(_ text: some StringProtocol) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// `text` percent-encoded for a URL's query: only unreserved characters (RFC 3986) stay.
    static func queryEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// A whole page: the console's header and navigation around `body`.
    /// With `signedIn` and an access token configured, the header has a form to sign out.
    static func page(title: String, console: TaskBrokerConsole, body: String, signedIn: Bool = true) -> String {
        var nav = [("", "Queues"), ("dead-letters", "Dead letters"), ("schedules", "Schedules"), ("rate-limits", "Rate limits"), ("workers", "Workers")]
            .map { "<a href=\"\(escape(console.link($0.0)))\">\($0.1)</a>" }
            .joined(separator: " · ")
        if signedIn, console.configuration.accessToken != nil {
            nav += " · " + button("Sign out", command: "logout", fields: [], console: console)
        }
        return """
            <!doctype html>
            <html lang="en" data-events="\(escape(console.link("events")))">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title)) · TaskBroker</title>
            <style>\(style)</style>
            <script src="\(escape(console.link("console.js")))" defer></script>
            </head>
            <body>
            <header><strong>TaskBroker</strong> <nav>\(nav)</nav> <span id="live"></span></header>
            <main>
            <h1>\(escape(title))</h1>
            \(body)
            </main>
            </body>
            </html>
            """
    }

    /// A form that posts one command with the console's CSRF token and `fields` (hidden).
    static func button(_ label: String, command: String, fields: [(String, String)], console: TaskBrokerConsole) -> String {
        let hidden = ([("csrf", console.secrets.csrfToken)] + fields)
            .map { "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">" }
            .joined()
        return "<form class=\"inline\" method=\"post\" action=\"\(escape(console.link(command)))\">\(hidden)<button type=\"submit\">\(escape(label))</button></form>"
    }

    /// A table with `headers` and already-escaped cells; a row with a queue name is that queue's
    /// (its live counts update it).
    static func table(_ headers: [String], _ rows: [[String]], queues: [String]? = nil) -> String {
        let head = headers.map { "<th>\(escape($0))</th>" }.joined()
        let body = rows.enumerated().map { index, cells in
            let queue = queues.map { " data-queue=\"\(escape($0[index]))\"" } ?? ""
            return "<tr\(queue)>" + cells.map { "<td>\($0)</td>" }.joined() + "</tr>"
        }.joined(separator: "\n")
        return "<table>\n<thead><tr>\(head)</tr></thead>\n<tbody>\n\(body)\n</tbody>\n</table>"
    }

    /// A payload as text: pretty-printed JSON when it is JSON, the text when it is UTF-8, a note
    /// with its size otherwise; cut at `limit` characters (`nil`: whole). Not escaped.
    static func payload(_ data: Data, pretty: Bool, limit: Int?) -> (text: String, cut: Bool) {
        var text: String
        if let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
           let encoded = try? JSONSerialization.data(
               withJSONObject: object, options: pretty ? [.prettyPrinted, .sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes] : [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes]
           ) {
            text = String(decoding: encoded, as: UTF8.self)
        } else if let utf8 = String(data: data, encoding: .utf8) {
            text = utf8
        } else {
            text = "(\(data.count) bytes, not UTF-8: base64 \(data.prefix(1_024).base64EncodedString()))"
        }
        guard let limit, text.count > limit else { return (text, false) }
        text = String(text.prefix(limit))
        return (text, true)
    }

    /// A date as an operator reads it: UTC, to the second.
    static func date(_ date: Date?) -> String {
        guard let date else { return "–" }
        return date.formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false).timeSeparator(.colon))
    }

    /// An age: `42s`, `3m05s`, `2h07m`, `3d04h`; `–` when unknown.
    static func age(since date: Date?, now: Date) -> String {
        guard let date else { return "–" }
        let seconds = max(0, now.timeIntervalSince(date))
        guard seconds.isFinite, seconds < 1e12 else { return "?" }
        let whole = Int(seconds)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        switch whole {
        case ..<60: return "\(whole)s"
        case ..<3600: return "\(whole / 60)m\(two(whole % 60))s"
        case ..<86_400: return "\(whole / 3600)h\(two(whole % 3600 / 60))m"
        default: return "\(whole / 86_400)d\(two(whole % 86_400 / 3600))h"
        }
    }

    /// A count with thousands separators.
    static func count(_ value: Int) -> String {
        value.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US_POSIX")))
    }

    /// An HTML response.
    static func response(_ html: String, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "text/html; charset=utf-8"
        fields[.cacheControl] = "no-store"
        // Only the console's own script runs (no inline script, nothing from elsewhere): a payload
        // that slipped through escaping could still run nothing.
        fields[.contentSecurityPolicy] =
            "default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        fields[.xContentTypeOptions] = "nosniff"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    private static let style = """
        body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
        header{background:#1f2937;color:#fff;padding:.6em 1em;display:flex;gap:1em;align-items:baseline}
        header a{color:#cbd5e1;margin:0 .3em}
        header form.inline button{font-size:12px}
        main{padding:1em}
        table{border-collapse:collapse;width:100%}
        th,td{border-bottom:1px solid #e5e7eb;padding:.3em .5em;text-align:left;vertical-align:top}
        td.n{text-align:right}
        pre{background:#f3f4f6;padding:.6em;overflow:auto;white-space:pre-wrap;word-break:break-all}
        code{word-break:break-all}
        form.inline{display:inline}
        .note{color:#6b7280}
        .bad{color:#b91c1c}
        [data-state=operator]{font-weight:bold}
        [data-state=failed]{color:#b91c1c}
        #live{margin-left:auto;color:#9ca3af}
        .charts{display:flex;flex-wrap:wrap;gap:.5em;margin:.5em 0}
        .charts img{border:1px solid #e5e7eb;max-width:100%;height:auto}
        """
}

extension HTTPField.Name {
    static var contentSecurityPolicy: Self { Self("Content-Security-Policy")! }
    static var xContentTypeOptions: Self { Self("X-Content-Type-Options")! }
}
