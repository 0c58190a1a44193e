import Foundation
import Synchronization
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TaskBroker
@testable import TaskBrokerConsole
import Testing

/// The charts of the queues page: what a sample of the counts records, how the SVG draws it, and
/// the routes that serve it.
@Suite struct ConsoleChartTests {
    private static let start = Date(timeIntervalSince1970: 1_800_000_000)

    private static func queue(_ name: String, pending: Int, parallel: Int = 0, waitingSince: Date? = nil) -> TaskQueueSnapshot {
        var snapshot = TaskQueueSnapshot(name: name, pending: pending, oldestSavedAt: waitingSince)
        snapshot.parallelPending = parallel
        return snapshot
    }

    @Test func aSampleCountsWhatLeftAndCameIntoEachQueueSinceTheOneBefore() {
        let history = ConsoleHistory(window: .seconds(60), spacing: .seconds(2))
        history.record([Self.queue("a", pending: 10), Self.queue("b", pending: 4), Self.queue("gone", pending: 5)], at: Self.start)
        // 4 s later: a drained 6, b took 6 more (4 of them plain parallel), gone drained 5, new took 3.
        history.record(
            [Self.queue("a", pending: 4), Self.queue("b", pending: 6, parallel: 4), Self.queue("new", pending: 3, waitingSince: Self.start)],
            at: Self.start + 4
        )
        let samples = history.samples(until: Self.start + 4)
        #expect(samples.count == 2)
        #expect(samples[0].depth == 19 && samples[0].drained == nil && samples[0].added == nil, "the first sample has no rates")
        #expect(samples[1].depth == 17)
        #expect(samples[1].drained == 11.0 / 4, "6 from a and 5 from the queue that emptied, over 4 s")
        #expect(samples[1].added == 9.0 / 4, "6 into b and 3 into the new queue, over 4 s")
        #expect(samples[1].oldestWait == 4, "the oldest pending action was saved 4 s before")
    }

    @Test func samplesAreSpacedAndOnlyTheWindowIsKept() {
        let history = ConsoleHistory(window: .seconds(10), spacing: .seconds(2))
        history.record([Self.queue("a", pending: 1)], at: Self.start)
        history.record([Self.queue("a", pending: 9)], at: Self.start + 1)
        #expect(history.samples(until: Self.start + 1).map(\.depth) == [1], "a read 1 s after a sample takes none")
        for second in stride(from: 2, through: 14, by: 2) {
            history.record([Self.queue("a", pending: second)], at: Self.start + TimeInterval(second))
        }
        let kept = history.samples(until: Self.start + 14)
        #expect(kept.map(\.at) == stride(from: 4, through: 14, by: 2).map { Self.start + TimeInterval($0) }, "the last 10 s")
        #expect(kept.first?.drained == 0 && kept.first?.added == 1, "2 more over the 2 s before")
    }

    @Test func aChartDrawsALinePerSeriesUnderARoundTopValue() {
        var samples: [ConsoleHistory.Sample] = []
        for step in 0..<5 {
            let at: Date = Self.start + TimeInterval(step * 15)
            let wait: Double = Double(step) * 3.5
            var sample = ConsoleHistory.Sample(at: at, depth: 100 - step * 10, oldestWait: wait)
            if step > 0 {
                sample.drained = 7.3
                sample.added = 1
            }
            samples.append(sample)
        }
        let now = Self.start + 60
        let throughput = ConsoleCharts.render(.throughput, samples, window: 60, now: now)
        let polylines = Self.polylines(throughput)
        #expect(polylines.count == 2, "drained and added")
        #expect(polylines.allSatisfy { $0.count == 4 }, "the first sample has no rate: \(polylines)")
        #expect(throughput.contains(">10</text>"), "the axis tops out at 10 for a largest rate of 7.3")
        // The latest sample is at `now`: the right edge. The first is a whole window back: the left.
        let depth = Self.polylines(ConsoleCharts.render(.depth, samples, window: 60, now: now))
        #expect(depth.count == 1 && depth[0].first?.x == ConsoleCharts.left && depth[0].last?.x == ConsoleCharts.width - ConsoleCharts.right)
        #expect(depth[0].first?.y == ConsoleCharts.top, "100 pending, the axis's top")
        #expect(depth[0].last.map { $0.y > ConsoleCharts.top } == true, "60 pending sits lower")
        let latency = ConsoleCharts.render(.latency, samples, window: 60, now: now)
        #expect(latency.contains(">20</text>"), "14 s of wait rounds up to 20")
        // Samples of the last 20 s of a 15-minute window span the chart's width.
        let recent = Self.polylines(ConsoleCharts.render(.depth, Array(samples.suffix(2)), window: 900, now: now + 5))
        #expect(recent.first?.first?.x == ConsoleCharts.left, "the first sample at the left edge: \(recent)")
        #expect(ConsoleCharts.render(.depth, Array(samples.suffix(2)), window: 900, now: now + 5).contains("−20 s"))
        for svg in [throughput, latency] {
            #expect(!svg.contains("href") && svg.components(separatedBy: "http").count == 2, "nothing fetched; only the SVG namespace")
        }
    }

    @Test func anEmptyWindowSaysSo() {
        let svg = ConsoleCharts.render(.throughput, [], window: 900, now: Self.start)
        #expect(svg.contains("no samples yet") && !svg.contains("<polyline"))
        #expect(svg.contains("−15 min"), "the whole window")
    }

    @Test func roundTopValues() {
        #expect([0, 0.3, 1, 7.3, 10, 11, 2_400].map(ConsoleCharts.roundedUp) == [0, 0.5, 1, 10, 10, 20, 5_000])
    }

    @Test func theQueuesPageShowsTheChartsThatItsRoutesServe() async throws {
        let fixture = try await ConsoleFixture(configuration: .init(accessToken: "secret-token"))
        defer { fixture.remove() }
        try await fixture.database.save([Note(key: "a", queueName: "q", text: "x"), Note(key: "b", queueName: "q", text: "y")])
        let bearer: HTTPFields = [.authorization: "Bearer secret-token"]
        try await fixture.withClient { client in
            let page = try await client.get("/", headers: bearer)
            for chart in ["throughput", "latency", "depth"] {
                #expect(page.text.contains("data-chart=\"/charts/\(chart).svg\""), "the page shows the \(chart) chart")
                let response = try await client.get("/charts/\(chart).svg", headers: bearer)
                #expect(response.status == .ok && response.headers[.contentType] == "image/svg+xml")
                #expect(response.text.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
                #expect(try await client.get("/charts/\(chart).svg").status == .unauthorized, "a chart asks for the token as a page does")
            }
            #expect(page.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("img-src 'self'") == true, "the page may show the console's own images")
            // The page's read was the first sample: 2 pending, drawn as the depth chart's one point.
            let depth = try await client.get("/charts/depth.svg", headers: bearer)
            #expect(depth.text.contains("<circle") && depth.text.contains(">2</text>"), "\(depth.text)")
            // The live counts reload the charts.
            #expect(ConsoleLive.scriptText.contains("img[data-chart]"))
        }
    }

    /// The console as a service samples on its own, every spacing, until cancelled: the charts
    /// cover the time no page was open. A read that fails leaves a gap, and sampling goes on.
    @Test func theConsoleAsAServiceSamplesEverySpacingUntilCancelled() async throws {
        let fixture = try await ConsoleFixture(configuration: .init(chartSpacing: .seconds(2)))
        defer { fixture.remove() }
        try await fixture.database.save([Note(key: "a", queueName: "q", text: "x"), Note(key: "b", queueName: "q", text: "y")])
        let clock = Mutex(Self.start)
        let sleeps = Mutex<[Duration]>([])
        await fixture.console.sample(every: .seconds(2), now: { clock.withLock { $0 } }) { spacing in
            let count = sleeps.withLock { sleeps in
                sleeps.append(spacing)
                return sleeps.count
            }
            clock.withLock { $0 += 2 }
            // Between the first and second samples, another action is saved.
            if count == 1 { try await fixture.database.save(Note(key: "c", queueName: "q", text: "z")) }
            if count == 3 { throw CancellationError() }
        }
        #expect(sleeps.withLock { $0 } == [.seconds(2), .seconds(2), .seconds(2)], "it waits the spacing between samples")
        let samples = fixture.console.history.samples(until: Self.start + 4)
        #expect(samples.map(\.depth) == [2, 3, 3], "a sample each spacing, the save between the first two seen: \(samples)")
        #expect(samples[1].added == 0.5, "one action in 2 s")
    }

    /// The points of each polyline of `svg`.
    private static func polylines(_ svg: String) -> [[(x: Double, y: Double)]] {
        svg.components(separatedBy: "points=\"").dropFirst().map { rest in
            rest.prefix { $0 != "\"" }.split(separator: " ").map { pair in
                let parts = pair.split(separator: ",").compactMap { Double($0) }
                return (parts[0], parts[1])
            }
        }
    }
}
