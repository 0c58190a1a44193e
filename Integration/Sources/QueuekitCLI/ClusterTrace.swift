/// What the trace files of a cluster run say (see `TraceLog`): who ran what, when, and whether
/// the cluster kept its promises after one worker was killed.
struct ClusterTrace: Sendable {
    /// One line of a trace file.
    struct Line: Sendable {
        var worker: Int
        var isStart: Bool
        var queue: String
        var key: String
        var attempt: Int
        /// `uploaded`, `retry` or `dead` for an end; empty for a start.
        var outcome: String
        var time: UInt64
    }

    /// A queue the killed worker held, and how long it stood still.
    struct Takeover: Sendable {
        var queue: String
        var seconds: Double
    }

    var lines: [Line]

    /// Reads the trace file text of each worker, in worker order; malformed lines (a line cut
    /// short by the kill) are skipped.
    init(texts: [String]) {
        lines = []
        for (worker, text) in texts.enumerated() {
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: " ").map(String.init)
                if fields.count == 5, fields[0] == "start", let attempt = Int(fields[3]), let time = UInt64(fields[4]) {
                    lines.append(Line(worker: worker, isStart: true, queue: fields[1], key: fields[2], attempt: attempt, outcome: "", time: time))
                } else if fields.count == 6, fields[0] == "end", let attempt = Int(fields[3]), let time = UInt64(fields[5]) {
                    lines.append(Line(worker: worker, isStart: false, queue: fields[1], key: fields[2], attempt: attempt, outcome: fields[4], time: time))
                }
            }
        }
        lines.sort { $0.time < $1.time }
    }

    /// Attempts ended with each outcome, counting an attempt that ran twice (a re-run) once.
    func outcomes() -> (uploaded: Int, uploadedAfterRetry: Int, retries: Int, deadLettered: Int) {
        var seen = Set<String>()
        var counts = (uploaded: 0, uploadedAfterRetry: 0, retries: 0, deadLettered: 0)
        for line in lines where !line.isStart && seen.insert("\(line.key) \(line.attempt)").inserted {
            switch line.outcome {
            case "uploaded":
                counts.uploaded += 1
                if line.attempt > 1 { counts.uploadedAfterRetry += 1 }
            case "retry": counts.retries += 1
            case "dead": counts.deadLettered += 1
            default: break
            }
        }
        return counts
    }

    /// Actions handled to the end (uploaded or dead-lettered) by each worker.
    func handled(by worker: Int) -> Int {
        lines.filter { $0.worker == worker && !$0.isStart && $0.outcome != "retry" }.count
    }

    /// Attempts that started more than once, and the runs of those that the kills do not explain
    /// (at-least-once allows only runs that a killed worker began before it died). `kills` maps
    /// each killed worker (a trace file) to the time of its kill.
    func reRuns(kills: [Int: UInt64]) -> (total: Int, unexplained: [String]) {
        var starts: [String: [Line]] = [:]
        for line in lines where line.isStart {
            starts["\(line.key) \(line.attempt)", default: []].append(line)
        }
        var total = 0
        var unexplained: [String] = []
        for (attempt, runs) in starts.sorted(by: { $0.key < $1.key }) where runs.count > 1 {
            total += runs.count - 1
            // Every run but the last must have been cut short by a kill.
            for run in runs.dropLast() where !Self.cutShort(run, by: kills) {
                unexplained.append("\(attempt) ran again after a run on worker \(run.worker + 1) that no kill cut short")
            }
        }
        return (total, unexplained)
    }

    /// Whether `run` began on a worker that was killed later.
    private static func cutShort(_ run: Line, by kills: [Int: UInt64]) -> Bool {
        kills[run.worker].map { run.time <= $0 } ?? false
    }

    /// The queues whose last event before the kill was the killed worker's, with the time until
    /// another worker started an action of each.
    func takeovers(killed: Int, at killTime: UInt64) -> [Takeover] {
        var last: [String: Line] = [:]
        var resumed: [String: UInt64] = [:]
        for line in lines {
            if line.time <= killTime {
                last[line.queue] = line
            } else if line.isStart, line.worker != killed, resumed[line.queue] == nil {
                resumed[line.queue] = line.time
            }
        }
        return last.values
            .filter { $0.worker == killed }
            .compactMap { line in
                resumed[line.queue].map { Takeover(queue: line.queue, seconds: Double($0 - killTime) / 1e9) }
            }
            .sorted { $0.seconds < $1.seconds }
    }

    /// Each moment an action of a queue started while another of the same queue was running
    /// anywhere. A run a kill cut short counts as running until that kill.
    func overlaps(kills: [Int: UInt64]) -> [String] {
        var running: [String: Line] = [:]
        var found: [String] = []
        for line in lines {
            if line.isStart {
                if let other = running[line.queue], !(kills[other.worker].map { line.time > $0 } ?? false) {
                    found.append("\(line.queue): \(line.key) started on worker \(line.worker + 1) while \(other.key) ran on worker \(other.worker + 1)")
                }
                running[line.queue] = line
            } else if let current = running[line.queue], current.key == line.key, current.worker == line.worker {
                running[line.queue] = nil
            }
        }
        return found
    }

    /// Each start of an action before every action enqueued ahead of it in its queue was done
    /// (uploaded or dead-lettered). Keys of one queue sort in the order they were enqueued (the
    /// demo's keys do).
    ///
    /// `deadLettered` are the keys the store holds as dead letters: a trace that lacks the end line
    /// of such a key's last attempt (its worker was killed before the line was written) counts the
    /// key as done at its last start (the overlap check covers the rest of its run).
    func outOfOrder(deadLettered: Set<String> = []) -> [String] {
        var keys: [String: [String]] = [:]
        var ended = Set<String>()
        var lastStart: [String: UInt64] = [:]
        for line in lines {
            keys[line.queue, default: []].append(line.key)
            if !line.isStart, line.outcome != "retry" { ended.insert(line.key) }
            if line.isStart, deadLettered.contains(line.key) { lastStart[line.key] = line.time }
        }
        var position: [String: [String: Int]] = [:]
        for (queue, queueKeys) in keys {
            let sorted = Array(Set(queueKeys)).sorted()
            position[queue] = Dictionary(uniqueKeysWithValues: sorted.enumerated().map { ($1, $0) })
        }
        var done: [String: Set<Int>] = [:]
        var firstUndone: [String: Int] = [:]
        var found: [String] = []
        for line in lines {
            guard let index = position[line.queue]?[line.key] else { continue }
            if line.isStart, index > firstUndone[line.queue, default: 0] {
                found.append("\(line.queue): \(line.key) started on worker \(line.worker + 1) before an earlier action was done")
            }
            let deadWithoutEnd = line.isStart && !ended.contains(line.key) && lastStart[line.key] == line.time
            if (!line.isStart && line.outcome != "retry") || deadWithoutEnd {
                done[line.queue, default: []].insert(index)
                var next = firstUndone[line.queue, default: 0]
                while done[line.queue, default: []].contains(next) { next += 1 }
                firstUndone[line.queue] = next
            }
        }
        return found
    }
}
