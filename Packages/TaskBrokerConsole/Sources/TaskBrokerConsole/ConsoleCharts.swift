import Foundation
import Hummingbird
import Synchronization
import TaskBroker

/// What the console has seen of the database over the last
/// ``TaskBrokerConsole/Configuration-swift.struct/chartWindow``: a sample each time it read every
/// queue's counts (a page of queues, the live counts, a chart), at most one per
/// ``TaskBrokerConsole/Configuration-swift.struct/chartSpacing``.
///
/// Each sample holds the pending actions of all queues (queued and plain parallel), the wait of the
/// longest-waiting one, and, against the sample before it, how fast actions left the queues and
/// came into them. Those rates are counted per queue and net: a queue that went from 10 pending to
/// 4 drained 6, one that went from 4 to 10 took 6 more, and one that took one and ran one between
/// two samples counts neither. The database keeps no record of finished actions; the rates are
/// what its counts show.
final class ConsoleHistory: Sendable {
    struct Sample: Sendable, Equatable {
        /// When the counts were read.
        var at: Date
        /// Pending actions of all queues (queued and plain parallel, not dead letters).
        var depth: Int
        /// How long the longest-waiting pending action had waited, in seconds (0 with none).
        var oldestWait: Double
        /// Actions per second that left their queues since the sample before (`nil`: the first).
        var drained: Double?
        /// Actions per second that came into their queues since the sample before.
        var added: Double?
    }

    private struct State {
        var samples: [Sample] = []
        /// The pending actions of each queue at the last sample.
        var depths: [String: Int] = [:]
    }

    let window: TimeInterval
    let spacing: TimeInterval
    private let state = Mutex(State())

    init(window: Duration, spacing: Duration) {
        self.window = window.seconds
        self.spacing = spacing.seconds
    }

    /// Records the counts of `queues` read at `now`, unless the last sample is younger than the
    /// spacing (or later than `now`).
    func record(_ queues: [TaskQueueSnapshot], at now: Date) {
        state.withLock { state in
            if let last = state.samples.last, now.timeIntervalSince(last.at) < spacing { return }
            var depths: [String: Int] = [:]
            depths.reserveCapacity(queues.count)
            var oldest = 0.0
            for queue in queues {
                depths[queue.name] = queue.pending + queue.parallelPending
                if let saved = queue.oldestSavedAt { oldest = max(oldest, now.timeIntervalSince(saved)) }
            }
            var sample = Sample(at: now, depth: depths.values.reduce(0, +), oldestWait: oldest)
            if let last = state.samples.last {
                let elapsed = now.timeIntervalSince(last.at)
                var drained = 0
                var added = 0
                for (name, before) in state.depths {
                    let after = depths[name] ?? 0
                    if after < before { drained += before - after } else { added += after - before }
                }
                for (name, after) in depths where state.depths[name] == nil { added += after }
                sample.drained = Double(drained) / elapsed
                sample.added = Double(added) / elapsed
            }
            state.samples.append(sample)
            state.depths = depths
            if let first = state.samples.firstIndex(where: { now.timeIntervalSince($0.at) <= window }), first > 0 {
                state.samples.removeFirst(first)
            }
        }
    }

    /// The samples of the window that ends at `now`, oldest first.
    func samples(until now: Date) -> [Sample] {
        state.withLock { state in state.samples.filter { now.timeIntervalSince($0.at) <= window } }
    }
}

/// The console's charts (`GET /charts/throughput.svg`, `/charts/latency.svg`, `/charts/depth.svg`):
/// SVG drawn on the server from ``ConsoleHistory``, with nothing fetched from anywhere.
struct ConsoleCharts: Sendable {
    let console: TaskBrokerConsole

    enum Chart: String, CaseIterable, Sendable {
        case throughput, latency, depth

        var title: String {
            switch self {
            case .throughput: "Actions per second: drained (green), added (blue)"
            case .latency: "Oldest wait, seconds"
            case .depth: "Pending actions, all queues"
            }
        }
    }

    /// The chart's response, after a sample of the counts: the live counts' read, shared with the
    /// streams and the other charts when one started within the last sample spacing (the pages
    /// reload all three charts at each live update).
    func response(_ chart: Chart) async throws -> Response {
        _ = try await console.liveCounts.value(notOlderThan: .now.advanced(by: .zero - console.configuration.chartSpacing))
        let now = Date()
        let svg = Self.render(chart, console.history.samples(until: now), window: console.history.window, now: now)
        return Response(
            status: .ok,
            headers: [.contentType: "image/svg+xml", .cacheControl: "no-store", .xContentTypeOptions: "nosniff"],
            body: .init(byteBuffer: ByteBuffer(string: svg))
        )
    }

    /// One line of a chart: its colour and its points (time, value).
    struct Line {
        var color: String
        var points: [(Date, Double)]
    }

    static func lines(_ chart: Chart, _ samples: [Sample]) -> [Line] {
        switch chart {
        case .throughput:
            [
                Line(color: "#15803d", points: samples.compactMap { sample in sample.drained.map { (sample.at, $0) } }),
                Line(color: "#1d4ed8", points: samples.compactMap { sample in sample.added.map { (sample.at, $0) } }),
            ]
        case .latency: [Line(color: "#b45309", points: samples.map { ($0.at, $0.oldestWait) })]
        case .depth: [Line(color: "#1f2937", points: samples.map { ($0.at, Double($0.depth)) })]
        }
    }

    typealias Sample = ConsoleHistory.Sample

    static let width = 400.0
    static let height = 150.0
    static let left = 48.0
    static let right = 12.0
    static let top = 24.0
    static let bottom = 22.0

    /// The chart as an SVG document: a line per series from its first sample (at most a window
    /// back) to `now`, the value axis from 0 to a round number above the largest value.
    static func render(_ chart: Chart, _ samples: [Sample], window: TimeInterval, now: Date) -> String {
        let lines = lines(chart, samples)
        let span = max(0, min(window, samples.first.map { now.timeIntervalSince($0.at) } ?? window))
        let largest = lines.flatMap(\.points).map(\.1).max() ?? 0
        let top = roundedUp(largest)
        let plotWidth = width - left - right
        let plotHeight = height - Self.top - bottom
        func x(_ date: Date) -> Double { span > 0 ? left + plotWidth * max(0, min(1, 1 - now.timeIntervalSince(date) / span)) : width - right }
        func y(_ value: Double) -> Double { Self.top + plotHeight * (1 - (top > 0 ? max(0, value) / top : 0)) }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" \
            font-family="system-ui,sans-serif" font-size="11" role="img">
            <title>\(HTML.escape(chart.title))</title>
            <rect x="0" y="0" width="\(Int(width))" height="\(Int(height))" fill="#fff"/>
            <text x="\(Int(left))" y="14" fill="#374151">\(HTML.escape(chart.title))</text>
            <line x1="\(left)" y1="\(y(0))" x2="\(width - right)" y2="\(y(0))" stroke="#9ca3af"/>
            <line x1="\(left)" y1="\(Self.top)" x2="\(width - right)" y2="\(Self.top)" stroke="#e5e7eb"/>
            <text x="\(left - 4)" y="\(Self.top + 4)" text-anchor="end" fill="#6b7280">\(number(top))</text>
            <text x="\(left - 4)" y="\(y(0) + 4)" text-anchor="end" fill="#6b7280">0</text>
            <text x="\(left)" y="\(height - 6)" fill="#6b7280">−\(HTML.escape(minutes(span)))</text>
            <text x="\(width - right)" y="\(height - 6)" text-anchor="end" fill="#6b7280">now</text>

            """
        if lines.allSatisfy({ $0.points.isEmpty }) {
            svg += "<text x=\"\(left + plotWidth / 2)\" y=\"\(Self.top + plotHeight / 2)\" text-anchor=\"middle\" fill=\"#9ca3af\">no samples yet</text>\n"
        }
        for line in lines where !line.points.isEmpty {
            let points = line.points.map { "\(rounded(x($0.0))),\(rounded(y($0.1)))" }.joined(separator: " ")
            svg += line.points.count == 1
                ? "<circle cx=\"\(rounded(x(line.points[0].0)))\" cy=\"\(rounded(y(line.points[0].1)))\" r=\"2\" fill=\"\(line.color)\"/>\n"
                : "<polyline fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"1.5\" points=\"\(points)\"/>\n"
        }
        return svg + "</svg>\n"
    }

    /// The smallest of 1, 2 and 5 times a power of ten that is at least `value` (0 for 0).
    static func roundedUp(_ value: Double) -> Double {
        guard value > 0, value.isFinite else { return 0 }
        let power = pow(10, floor(log10(value)))
        for step in [1.0, 2, 5, 10] where step * power >= value * (1 - 1e-12) { return step * power }
        return 10 * power
    }

    static func number(_ value: Double) -> String {
        value >= 1 || value == 0 ? HTML.count(Int(value.rounded())) : String(value)
    }

    static func rounded(_ value: Double) -> String {
        String(format: "%.1f", value)
    }

    static func minutes(_ window: TimeInterval) -> String {
        window >= 120 ? "\(Int(window / 60)) min" : "\(Int(window)) s"
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
