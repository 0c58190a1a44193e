import Foundation
import Hummingbird
import TaskBroker

/// The console's pages (`GET`), each built from the database as it is when asked.
struct ConsolePages: Sendable {
    let console: TaskBrokerConsole
    private var database: TaskDatabase { console.database }
    private var configuration: TaskBrokerConsole.Configuration { console.configuration }

    /// Every queue: pending actions, the oldest's age, dead letters, failures of its head, its state.
    func queues(_ request: Request) async throws -> String {
        let now = Date()
        let all = try await database.snapshot()
        console.history.record(all, at: now)
        let query = Query(request)
        let after = query["after"]
        let shown = Array(all.filter { queue in after.map { queue.name > $0 } ?? true }.prefix(configuration.pageSize))
        let rows = shown.map { queue -> [String] in
            [
                "<a href=\"\(HTML.escape(console.link("queue", [("name", queue.name)])))\"><code>\(HTML.escape(queue.name))</code></a>",
                field("pending", queue.pending), field("parallel", queue.parallelPending),
                HTML.escape(HTML.age(since: queue.oldestSavedAt, now: now)),
                "<a href=\"\(HTML.escape(console.link("dead-letters", [("queue", queue.name)])))\">\(field("deadLetters", queue.deadLetters))</a>",
                field("failures", queue.attempts),
                state(of: queue) + (queue.lastFailure.map { "<br><span class=\"bad\">\(HTML.escape($0.reason))</span>" } ?? ""),
                pauseButton(queue),
            ]
        }
        let totals = "<p>\(total("queues", all.count)) queue(s), \(total("pending", all.reduce(0) { $0 + $1.pending })) pending, "
            + "\(total("parallel", all.reduce(0) { $0 + $1.parallelPending })) plain parallel pending, "
            + "\(total("deadLetters", all.reduce(0) { $0 + $1.deadLetters })) dead letter(s), "
            + "\(total("paused", all.count { $0.pausedByOperator })) paused by an operator. "
            + "<span class=\"note\">Counts update live; reload for new queues.</span></p>"
        var body = totals + charts()
        body += all.isEmpty ? "<p class=\"note\">No queues.</p>"
            : HTML.table(["Queue", "Pending", "Parallel", "Oldest", "Dead letters", "Failures", "State", ""], rows, queues: shown.map(\.name))
        if let last = shown.last, all.contains(where: { $0.name > last.name }), shown.count == configuration.pageSize {
            body += "<p><a href=\"\(HTML.escape(console.link("", [("after", last.name)])))\">Next queues</a></p>"
        }
        return HTML.page(title: "Queues", console: console, body: body)
    }

    /// The charts of the queues page; the live counts' script reloads them with each update.
    private func charts() -> String {
        let images = ConsoleCharts.Chart.allCases.map { chart in
            let source = HTML.escape(console.link("charts/\(chart.rawValue).svg"))
            return "<img src=\"\(source)\" data-chart=\"\(source)\" width=\"\(Int(ConsoleCharts.width))\" "
                + "height=\"\(Int(ConsoleCharts.height))\" alt=\"\(HTML.escape(chart.title))\">"
        }
        return "<div class=\"charts\">\(images.joined())</div>"
            + "<p class=\"note\">Charts: what this console read over the last \(ConsoleCharts.minutes(console.history.window)), "
            + "a sample at most every \(ConsoleCharts.number(console.history.spacing)) s while a page, its live counts or a chart is open. "
            + "Rates are net per queue between two samples.</p>"
    }

    /// A queue's stored actions in the order they run, a page at a time.
    func queue(_ request: Request) async throws -> String {
        let query = Query(request)
        let name = try query.required("name")
        let after = try query.integer("after").map { [name: $0] } ?? [:]
        let tasks = try await database.storage.tasks(inQueues: [name], after: after, limit: configuration.pageSize)[name] ?? []
        let snapshot = try await database.snapshot().first { $0.name == name }
        var body = ""
        if let snapshot {
            body += "<p data-queue=\"\(HTML.escape(name))\">\(field("pending", snapshot.pending)) pending, "
                + "\(field("parallel", snapshot.parallelPending)) plain parallel, "
                + "\(field("deadLetters", snapshot.deadLetters)) dead letter(s). \(state(of: snapshot))</p>"
            body += "<p>\(pauseButton(snapshot)) "
                + HTML.button("Purge", command: "purge", fields: [("queue", name)], console: console)
                + " <span class=\"note\">(deletes every pending action of this queue)</span></p>"
        } else {
            body += "<p class=\"note\">No action is stored in this queue.</p>"
        }
        if !tasks.isEmpty {
            let now = Date()
            let rows = tasks.map { task -> [String] in
                [
                    actionLink(key: task.key, collection: task.collection),
                    number(task.attempts), number(task.priority),
                    task.notBefore.map { $0 > now ? HTML.escape(HTML.date($0)) : "now" } ?? "now",
                    task.lastFailure.map { "<span class=\"bad\">\(HTML.escape($0.reason))</span>" } ?? "",
                    preview(task.payload),
                    HTML.button("Delete", command: "delete", fields: [("key", task.key), ("collection", task.collection)], console: console),
                ]
            }
            body += HTML.table(["Action", "Failures", "Priority", "Starts", "Last failure", "Payload", ""], rows)
            if tasks.count == configuration.pageSize, let last = tasks.last {
                body += "<p><a href=\"\(HTML.escape(console.link("queue", [("name", name), ("after", String(last.position))])))\">Next actions</a></p>"
            }
        }
        return HTML.page(title: "Queue \(name)", console: console, body: body)
    }

    /// One action, live or a dead letter: where it is, its attempts, its last failure, its payload.
    func action(_ request: Request) async throws -> String {
        let query = Query(request)
        let key = try query.required("key")
        let collection = try query.required("collection")
        guard let found = try await database.lookup(key: key, collection: collection) else {
            throw ConsoleError.notFound("No action with key \"\(key)\" in collection \"\(collection)\" is stored.")
        }
        let task = found.task
        let full = query["full"] == "1"
        let payload = HTML.payload(task.payload, pretty: true, limit: full ? nil : configuration.payloadLimit)
        var facts: [(String, String)] = [
            ("Key", "<code>\(HTML.escape(task.key))</code>"),
            ("Collection", "<code>\(HTML.escape(task.collection))</code>"),
            ("Queue", "<a href=\"\(HTML.escape(console.link("queue", [("name", task.queueName)])))\"><code>\(HTML.escape(task.queueName))</code></a>"),
        ]
        let commands: String
        switch found {
        case .live:
            facts.append(("State", "waiting, paused or running in its queue"))
            commands = HTML.button("Delete", command: "delete", fields: [("key", key), ("collection", collection)], console: console)
        case .deadLetter:
            facts.append(("State", "<span class=\"bad\">dead letter</span>"))
            commands = HTML.button("Replay", command: "replay", fields: [("key", key), ("collection", collection)], console: console) + " "
                + HTML.button("Discard", command: "discard", fields: [("key", key), ("collection", collection)], console: console)
        }
        facts += [
            ("Failed attempts", HTML.count(task.attempts)),
            ("Priority", String(task.priority)),
            ("Not before", HTML.escape(HTML.date(task.notBefore))),
            ("Last failure", task.lastFailure.map { "\(HTML.escape($0.reason)) (\(HTML.escape(HTML.date($0.failedAt))))" } ?? "–"),
            ("Payload size", "\(HTML.count(task.payload.count)) bytes"),
        ]
        var body = HTML.table(["", ""], facts.map { [HTML.escape($0.0), $0.1] })
        body += "<p>\(commands)</p><h2>Payload</h2><pre>\(HTML.escape(payload.text))</pre>"
        if payload.cut {
            let link = console.link("action", [("key", key), ("collection", collection), ("full", "1")])
            body += "<p class=\"note\">Cut at \(HTML.count(configuration.payloadLimit)) characters. <a href=\"\(HTML.escape(link))\">Show all</a></p>"
        }
        return HTML.page(title: "Action \(key)", console: console, body: body)
    }

    /// The dead letters, of one queue or of all, each with replay and discard.
    func deadLetters(_ request: Request) async throws -> String {
        let query = Query(request)
        let queue = query["queue"].flatMap { $0.isEmpty ? nil : $0 }
        let letters = try await database.deadLetters(queueName: queue)
        let shown = letters.prefix(configuration.pageSize)
        var body = "<p>\(HTML.count(letters.count)) dead letter(s)\(queue.map { " in <code>\(HTML.escape($0))</code>" } ?? "").</p>"
        if !shown.isEmpty {
            let rows = shown.map { letter -> [String] in
                [
                    "<code>\(HTML.escape(letter.queueName))</code>",
                    actionLink(key: letter.key, collection: letter.collection),
                    number(letter.attempts), HTML.escape(HTML.date(letter.failedAt)),
                    "<span class=\"bad\">\(HTML.escape(letter.reason))</span>",
                    preview(letter.payload),
                    HTML.button("Replay", command: "replay", fields: [("key", letter.key), ("collection", letter.collection)], console: console) + " "
                        + HTML.button("Discard", command: "discard", fields: [("key", letter.key), ("collection", letter.collection)], console: console),
                ]
            }
            body += HTML.table(["Queue", "Action", "Attempts", "Failed at", "Reason", "Payload", ""], rows)
        }
        if letters.count > shown.count {
            body += "<p class=\"note\">\(HTML.count(letters.count - shown.count)) more not shown; replay or discard these first, or list one queue.</p>"
        }
        return HTML.page(title: "Dead letters", console: console, body: body)
    }

    /// The schedules the database's schedulers registered, with their last and next ticks.
    func schedules(_ request: Request) async throws -> String {
        let schedules = try await database.schedules()
        let rows = schedules.map {
            [
                "<code>\(HTML.escape($0.name))</code>", HTML.escape($0.recurrence), HTML.escape(HTML.date($0.lastTick)),
                $0.lastKey.map { "<code>\(HTML.escape($0))</code>" } ?? "–", HTML.escape(HTML.date($0.nextTick)),
            ]
        }
        let body = schedules.isEmpty ? "<p class=\"note\">No schedules.</p>"
            : HTML.table(["Schedule", "Recurrence", "Last tick", "Its action", "Next tick"], rows)
        return HTML.page(title: "Schedules", console: console, body: body)
    }

    /// The brokers that hold leases now (PostgreSQL): the queues each holds, with their epochs
    /// and when their leases end, and its plain parallel actions.
    func workers(_ request: Request) async throws -> String {
        let now = Date()
        guard database.storage.isShared else {
            let body = "<p class=\"note\">This database is an SQLite file: its brokers run on one machine and take queues "
                + "through the file's locks; they hold no leases to list.</p>"
            return HTML.page(title: "Workers", console: console, body: body)
        }
        let workers = try await database.workers()
        let shownQueues = 50
        let rows = workers.prefix(configuration.pageSize).map { worker -> [String] in
            var queues = worker.queues.prefix(shownQueues).map { lease in
                "<a href=\"\(HTML.escape(console.link("queue", [("name", lease.queueName)])))\"><code>\(HTML.escape(lease.queueName))</code></a>"
                    + " <span class=\"note\">epoch \(lease.epoch), ends in \(HTML.escape(HTML.age(since: now, now: lease.expiresAt)))</span>"
            }
            if worker.queues.count > shownQueues { queues.append("<span class=\"note\">and \(HTML.count(worker.queues.count - shownQueues)) more</span>") }
            return [
                "<code>\(HTML.escape(worker.brokerName))</code>", "<code>\(HTML.escape(worker.process))</code>",
                number(worker.queues.count), queues.joined(separator: "<br>"), number(worker.parallelActions),
                worker.parallelExpiresAt.map { "in " + HTML.escape(HTML.age(since: now, now: $0)) } ?? "–",
            ]
        }
        var body = "<p>\(HTML.count(workers.count)) broker(s) in \(HTML.count(Set(workers.map(\.process)).count)) process(es) hold leases: "
            + "\(HTML.count(workers.reduce(0) { $0 + $1.queues.count })) queue(s), "
            + "\(HTML.count(workers.reduce(0) { $0 + $1.parallelActions })) plain parallel action(s). "
            + "<span class=\"note\">A lease its holder stops renewing ends, and another broker takes its queue over.</span></p>"
        body += workers.isEmpty ? "<p class=\"note\">No broker holds a lease.</p>"
            : HTML.table(["Broker", "Process", "Queues", "Their leases", "Parallel actions", "Their claims end"], rows)
        if workers.count > configuration.pageSize {
            body += "<p class=\"note\">\(HTML.count(workers.count - configuration.pageSize)) more broker(s) not shown.</p>"
        }
        return HTML.page(title: "Workers", console: console, body: body)
    }

    /// The starts each rate limit's bucket counts now.
    func rateLimits(_ request: Request) async throws -> String {
        let now = Date()
        let usage = try await database.rateLimitUsage()
        let rows = usage.map { bucket -> [String] in
            let (kind, name): (String, Substring) = bucket.bucket.hasPrefix("prefix:") ? ("queues of prefix", bucket.bucket.dropFirst(7))
                : bucket.bucket.hasPrefix("queue:") ? ("queue", bucket.bucket.dropFirst(6)) : ("bucket", Substring(bucket.bucket))
            return [
                HTML.escape(kind), "<code>\(HTML.escape(String(name)))</code>", number(bucket.starts),
                HTML.escape(HTML.age(since: bucket.latestStart, now: now)) + " ago", "in " + HTML.escape(HTML.age(since: now, now: bucket.emptyAt)),
            ]
        }
        var body = "<p class=\"note\">A limit is set in each broker's configuration (<code>rateLimits</code>); the database "
            + "counts the starts every broker recorded under it, and these still count against it.</p>"
        body += usage.isEmpty ? "<p class=\"note\">No start counts against a rate limit now.</p>"
            : HTML.table(["Limit of", "Name", "Starts in the window", "Latest start", "Empty"], rows)
        return HTML.page(title: "Rate limits", console: console, body: body)
    }

    private func number(_ value: Int) -> String { HTML.count(value) }

    private func actionLink(key: String, collection: String) -> String {
        let link = console.link("action", [("key", key), ("collection", collection)])
        return "<a href=\"\(HTML.escape(link))\"><code>\(HTML.escape(key))</code></a><br><span class=\"note\">\(HTML.escape(collection))</span>"
    }

    private func preview(_ payload: Data) -> String {
        let shown = HTML.payload(payload, pretty: false, limit: configuration.payloadPreview)
        return "<code>\(HTML.escape(shown.text))\(shown.cut ? "…" : "")</code>"
    }

    /// A queue's state, as live counts update it.
    private func state(of queue: TaskQueueSnapshot) -> String {
        // The page's style marks the kind (bold when an operator paused it, red when it failed); the
        // live counts update the text and the kind together.
        "<span data-field=\"state\" data-state=\"\(Self.stateKind(of: queue))\">\(HTML.escape(Self.stateText(of: queue)))</span>"
    }

    /// A queue's state as one word the page's style marks: `operator` (paused by an operator),
    /// `failed` (paused until a broker restarts it), `retrying`, `ready` or `empty`.
    static func stateKind(of queue: TaskQueueSnapshot) -> String {
        if queue.pausedByOperator { return "operator" }
        switch queue.pause {
        case .untilRestart: return "failed"
        case .some: return "retrying"
        case nil: return queue.pending + queue.parallelPending > 0 ? "ready" : "empty"
        }
    }

    /// A queue's state in words.
    static func stateText(of queue: TaskQueueSnapshot) -> String {
        if queue.pausedByOperator { return "paused by an operator" }
        switch queue.pause {
        case .untilRestart: return "paused until a broker restarts it"
        case .some: return "retrying at \(HTML.date(queue.pausedUntil))"
        case nil: return queue.pending + queue.parallelPending > 0 ? "ready" : "empty"
        }
    }

    /// A count of a queue's that live counts update.
    private func field(_ name: String, _ value: Int) -> String {
        "<span data-field=\"\(name)\">\(HTML.count(value))</span>"
    }

    /// A database-wide count that live counts update.
    private func total(_ name: String, _ value: Int) -> String {
        "<span data-total=\"\(name)\">\(HTML.count(value))</span>"
    }

    private func pauseButton(_ queue: TaskQueueSnapshot) -> String {
        queue.pausedByOperator
            ? HTML.button("Resume", command: "resume", fields: [("queue", queue.name)], console: console)
            : HTML.button("Pause", command: "pause", fields: [("queue", queue.name)], console: console)
    }
}

/// A page's query parameters.
struct Query: Sendable {
    private let parameters: [String: String]

    init(_ request: Request) {
        var parameters: [String: String] = [:]
        for (name, value) in request.uri.queryParameters { parameters[String(name)] = String(value) }
        self.parameters = parameters
    }

    subscript(_ name: String) -> String? { parameters[name] }

    /// A parameter that must be there and not be empty.
    func required(_ name: String) throws -> String {
        guard let value = parameters[name], !value.isEmpty else { throw ConsoleError.badRequest("The page needs \"\(name)\" in its query.") }
        return value
    }

    /// A whole number, if given.
    func integer(_ name: String) throws -> Int64? {
        guard let text = parameters[name] else { return nil }
        guard let value = Int64(text) else { throw ConsoleError.badRequest("\"\(name)\" must be a whole number, not \"\(text)\".") }
        return value
    }
}
