public import Hummingbird
public import TaskBroker

/// TaskBroker's web console: pages over a `TaskDatabase` (its queues with charts of throughput,
/// oldest wait and pending actions, a queue's actions, an action, dead letters, schedules, rate
/// limits' starts, and the workers that hold leases) and the operator's commands on it (pause, resume,
/// replay, discard, delete, purge), as routes that a Hummingbird application mounts.
///
/// ```swift
/// let console = TaskBrokerConsole(database: database, configuration: .init(basePath: "/admin/jobs"))
/// console.addRoutes(to: router.group("admin/jobs").add(middleware: MyAuthMiddleware()))
/// ```
///
/// Every command is a `POST` with the console's CSRF token in its form, and every name, key and
/// payload is HTML-escaped. Bad input gets a 4xx page that says what was wrong; a database that
/// cannot be read or written gets a 503 that says so. With
/// ``Configuration-swift.struct/accessToken`` set, every route asks for that token (a bearer token,
/// or the console's login form, which sets a cookie).
public struct TaskBrokerConsole: Sendable {
    /// How the console is reached and what it shows.
    public struct Configuration: Sendable {
        /// The path the routes are mounted at, as a browser sees it (`""` at the server's root,
        /// `"/admin/jobs"` under that group); every link and form of the console starts with it.
        public var basePath: String
        /// When set, every route asks for this token: `Authorization: Bearer <token>`, or the cookie
        /// that the console's login form sets. `nil` (the default) leaves access control to the
        /// application's middleware.
        public var accessToken: String?
        /// At most this many rows on a page (actions of a queue, dead letters, queues); the page
        /// links to the next ones.
        public var pageSize: Int
        /// Payloads in lists are cut at this many characters.
        public var payloadPreview: Int
        /// On an action's page, its payload is cut at this many characters unless `full=1` asks
        /// for all of it.
        public var payloadLimit: Int
        /// The live counts (`GET /events`) are sent at most this often.
        public var liveInterval: Duration
        /// The live counts are sent at least this often, changed or not (which also finds a
        /// client that went away).
        public var liveHeartbeat: Duration
        /// The charts of the queues page (throughput, oldest wait, pending) cover this much time,
        /// up to now.
        public var chartWindow: Duration
        /// The charts take a sample of the counts whenever the console reads them (a page of
        /// queues, the live counts, a chart), at most this often.
        public var chartSpacing: Duration

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - basePath: The path the routes are mounted at (`""`: the server's root).
        ///   - accessToken: A token every route asks for; `nil` leaves access control to the application.
        ///   - pageSize: Rows on a page (at least 1).
        ///   - payloadPreview: Characters of a payload shown in lists.
        ///   - payloadLimit: Characters of a payload shown on its action's page without `full=1`.
        ///   - liveInterval: The shortest time between two updates of the live counts.
        ///   - liveHeartbeat: The longest time between two updates of the live counts.
        ///   - chartWindow: How much time the charts cover.
        ///   - chartSpacing: The shortest time between two samples of the charts.
        public init(
            basePath: String = "", accessToken: String? = nil, pageSize: Int = 100, payloadPreview: Int = 160, payloadLimit: Int = 65_536,
            liveInterval: Duration = .seconds(1), liveHeartbeat: Duration = .seconds(15),
            chartWindow: Duration = .seconds(900), chartSpacing: Duration = .seconds(2)
        ) {
            self.basePath = basePath
            self.accessToken = accessToken
            self.pageSize = pageSize
            self.payloadPreview = payloadPreview
            self.payloadLimit = payloadLimit
            self.liveInterval = liveInterval
            self.liveHeartbeat = liveHeartbeat
            self.chartWindow = chartWindow
            self.chartSpacing = chartSpacing
        }
    }

    /// The database the console shows and acts on.
    public let database: TaskDatabase
    /// How the console is reached and what it shows.
    public let configuration: Configuration
    let secrets: ConsoleSecrets
    /// The samples the charts draw.
    let history: ConsoleHistory
    /// The live counts, read once for every stream woken by the same change.
    let liveCounts: SharedRead<ConsoleLive.Counts>

    /// Creates a console over `database`.
    ///
    /// - Parameters:
    ///   - database: The TaskBroker database to show and act on (SQLite or PostgreSQL).
    ///   - configuration: Where it is mounted, access control and page sizes.
    public init(database: TaskDatabase, configuration: Configuration = .init()) {
        self.database = database
        var configuration = configuration
        configuration.basePath = Self.normalized(configuration.basePath)
        configuration.pageSize = max(1, configuration.pageSize)
        configuration.payloadPreview = max(16, configuration.payloadPreview)
        configuration.payloadLimit = max(configuration.payloadPreview, configuration.payloadLimit)
        configuration.liveInterval = max(.milliseconds(10), configuration.liveInterval)
        configuration.liveHeartbeat = max(configuration.liveInterval, configuration.liveHeartbeat)
        configuration.chartSpacing = max(.milliseconds(10), configuration.chartSpacing)
        configuration.chartWindow = max(configuration.chartSpacing, configuration.chartWindow)
        self.configuration = configuration
        self.secrets = ConsoleSecrets()
        let history = ConsoleHistory(window: configuration.chartWindow, spacing: configuration.chartSpacing)
        self.history = history
        let rows = configuration.pageSize * 10
        self.liveCounts = SharedRead { try await ConsoleLive.counts(of: database, history: history, rows: rows) }
    }

    /// Adds the console's routes to `router` (a `Router`, or a `RouterGroup` with the
    /// application's own middleware). The routes are relative to `router`; tell the console where
    /// that is with ``Configuration-swift.struct/basePath``.
    ///
    /// - Parameter router: The router or group to add the routes to.
    public func addRoutes<Context: RequestContext>(to router: some RouterMethods<Context>) {
        let pages = ConsolePages(console: self)
        let commands = ConsoleCommands(console: self)
        let access = ConsoleAccess(console: self)
        router.get("/") { request, _ in try await access.page(request) { try await pages.queues(request) } }
        router.get("queue") { request, _ in try await access.page(request) { try await pages.queue(request) } }
        router.get("action") { request, _ in try await access.page(request) { try await pages.action(request) } }
        router.get("dead-letters") { request, _ in try await access.page(request) { try await pages.deadLetters(request) } }
        router.get("schedules") { request, _ in try await access.page(request) { try await pages.schedules(request) } }
        router.get("rate-limits") { request, _ in try await access.page(request) { try await pages.rateLimits(request) } }
        router.get("workers") { request, _ in try await access.page(request) { try await pages.workers(request) } }
        let live = ConsoleLive(console: self)
        router.get("events") { request, _ in try await access.stream(request) { try await live.events() } }
        router.get("console.js") { _, _ in ConsoleLive.script() }
        let charts = ConsoleCharts(console: self)
        for chart in ConsoleCharts.Chart.allCases {
            router.get(RouterPath(stringLiteral: "charts/\(chart.rawValue).svg")) { request, _ in
                try await access.stream(request) { try await charts.response(chart) }
            }
        }
        router.get("login") { request, _ in access.loginPage(request) }
        router.post("login") { request, _ in try await access.login(request) }
        router.post("logout") { request, _ in try await access.logout(request) }
        for command in ConsoleCommands.Command.allCases {
            router.post(RouterPath(stringLiteral: command.rawValue)) { request, _ in
                try await access.command(request) { form in try await commands.run(command, form) }
            }
            // A link or a typed address never changes anything: commands are posted from forms.
            router.get(RouterPath(stringLiteral: command.rawValue)) { _, _ in
                ConsoleError(status: .methodNotAllowed, message: "\(command.rawValue) is a command: it is posted from a form of the console, with its token.")
                    .response(self, headers: [.allow: "POST"])
            }
        }
    }

    /// A base path without a trailing slash, with a leading one unless empty.
    static func normalized(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        while trimmed.hasPrefix("/") { trimmed = trimmed.dropFirst() }
        return trimmed.isEmpty ? "" : "/" + trimmed
    }

    /// The link to one of the console's pages, with its query.
    func link(_ page: String, _ query: [(String, String)] = []) -> String {
        var link = configuration.basePath + "/" + page
        if !query.isEmpty {
            link += "?" + query.map { "\($0.0)=\(HTML.queryEncoded($0.1))" }.joined(separator: "&")
        }
        return link
    }
}
