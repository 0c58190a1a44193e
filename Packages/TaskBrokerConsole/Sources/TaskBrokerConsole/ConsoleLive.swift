import Foundation
import HTTPTypes
import Hummingbird
import ServiceLifecycle
import TaskBroker

/// The console's live counts: a server-sent event stream (`GET /events`) that sends the
/// database's counts when the database says queues changed (``TaskDatabase/queueChanges()``, from
/// every process that shares it), at most once per ``TaskBrokerConsole/Configuration-swift.struct/liveInterval``,
/// and at least every ``TaskBrokerConsole/Configuration-swift.struct/liveHeartbeat``; and the
/// script that shows them on the pages.
struct ConsoleLive: Sendable {
    let console: TaskBrokerConsole

    /// The counts the pages show, as the event's JSON.
    struct Counts: Codable, Sendable, Equatable {
        struct Row: Codable, Sendable, Equatable {
            var pending: Int
            var parallel: Int
            var deadLetters: Int
            var failures: Int
            var state: String
            /// The state's kind, which the page's style marks (`ConsolePages.stateKind(of:)`).
            var stateKind: String
        }

        var queues: Int
        var pending: Int
        var parallel: Int
        var deadLetters: Int
        var paused: Int
        /// Per queue, for the first queues by name (``TaskBrokerConsole/Configuration-swift.struct/pageSize``
        /// times ten at most); a queue absent here is empty or beyond that.
        var rows: [String: Row]
    }

    /// The event stream's response: counts at once, then as queues change, until the client goes
    /// away or the server shuts down (gracefully: the stream ends so that shutdown does not wait).
    func events() async throws -> Response {
        let changes = try await console.database.queueChanges()
        let interval = console.configuration.liveInterval
        let heartbeat = console.configuration.liveHeartbeat
        let body = ResponseBody { writer in
            let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
            try await withThrowingTaskGroup { group in
                // The database's changes, and the heartbeat, wake the loop below.
                group.addTask {
                    for await _ in changes { wake.yield() }
                }
                group.addTask {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: heartbeat)
                        wake.yield()
                    }
                }
                defer { group.cancelAll() }
                // A graceful shutdown ends the wakes, and so the stream: the server does not wait for it.
                try await withGracefulShutdownHandler {
                    try await writer.write(ByteBuffer(string: "retry: 2000\n\n"))
                    try await writer.write(try await event(notOlderThan: .now))
                    for await _ in wakes {
                        // Streams woken by the same change share one read of the counts.
                        try await writer.write(try await event(notOlderThan: .now))
                        // Changes meanwhile wait in the one-element buffer: one update per interval.
                        try await Task.sleep(for: interval)
                    }
                } onGracefulShutdown: {
                    wake.finish()
                }
            }
            try await writer.finish(nil)
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-store", HTTPField.Name("X-Accel-Buffering")!: "no"],
            body: body
        )
    }

    /// The counts read no earlier than `moment` (a read another stream started since is shared),
    /// as one `counts` event.
    func event(notOlderThan moment: ContinuousClock.Instant = .now) async throws -> ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = try encoder.encode(try await console.liveCounts.value(notOlderThan: moment))
        return ByteBuffer(string: "event: counts\ndata: \(String(decoding: json, as: UTF8.self))\n\n")
    }

    /// The counts now, read from `database` (a sample of the charts' `history` too), with rows for
    /// the first `rows` queues.
    static func counts(of database: TaskDatabase, history: ConsoleHistory, rows limit: Int) async throws -> Counts {
        let queues = try await database.snapshot()
        history.record(queues, at: Date())
        var rows: [String: Counts.Row] = [:]
        for queue in queues.prefix(limit) {
            rows[queue.name] = Counts.Row(
                pending: queue.pending, parallel: queue.parallelPending, deadLetters: queue.deadLetters,
                failures: queue.attempts, state: ConsolePages.stateText(of: queue), stateKind: ConsolePages.stateKind(of: queue)
            )
        }
        return Counts(
            queues: queues.count, pending: queues.reduce(0) { $0 + $1.pending }, parallel: queues.reduce(0) { $0 + $1.parallelPending },
            deadLetters: queues.reduce(0) { $0 + $1.deadLetters }, paused: queues.count { $0.pausedByOperator }, rows: rows
        )
    }

    /// The pages' script: listens to the event stream and writes the counts into the elements
    /// that show them (as text: nothing from the stream becomes markup).
    static func script() -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/javascript; charset=utf-8", .cacheControl: "no-cache", .xContentTypeOptions: "nosniff"],
            body: .init(byteBuffer: ByteBuffer(string: scriptText))
        )
    }

    static let scriptText = """
        "use strict";
        (function () {
          var url = document.documentElement.getAttribute("data-events");
          if (!url || !window.EventSource) { return; }
          var number = new Intl.NumberFormat("en-US");
          var source = new EventSource(url);
          var status = document.getElementById("live");
          source.addEventListener("counts", function (message) {
            var counts = JSON.parse(message.data);
            document.querySelectorAll("[data-total]").forEach(function (element) {
              var value = counts[element.getAttribute("data-total")];
              if (typeof value === "number") { element.textContent = number.format(value); }
            });
            document.querySelectorAll("[data-queue]").forEach(function (element) {
              var row = counts.rows[element.getAttribute("data-queue")] ||
                { pending: 0, parallel: 0, deadLetters: 0, failures: 0, state: "empty", stateKind: "empty" };
              element.querySelectorAll("[data-field]").forEach(function (field) {
                var value = row[field.getAttribute("data-field")];
                if (value === undefined) { return; }
                field.textContent = typeof value === "number" ? number.format(value) : value;
                if (field.hasAttribute("data-state")) { field.setAttribute("data-state", row.stateKind); }
              });
            });
            var stamp = Date.now();
            document.querySelectorAll("img[data-chart]").forEach(function (image) {
              image.src = image.getAttribute("data-chart") + "?t=" + stamp;
            });
            if (status) { status.textContent = "live, updated " + new Date().toLocaleTimeString(); }
          });
          source.addEventListener("error", function () {
            if (status) { status.textContent = "reconnecting…"; }
          });
        })();
        """
}
