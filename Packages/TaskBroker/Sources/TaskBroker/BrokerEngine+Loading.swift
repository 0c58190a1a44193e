import Foundation
import Logging
import Synchronization

extension BrokerEngine {
    /// Reads and decodes a queue's stored actions, sorted in run order (the held action first
    /// if one is paused). Runs off the driver at startup, so both cores work.
    static func read(_ queueName: String, from storage: any TaskStorage, since: Duration) async throws -> [Entry] {
        entries(from: try await storage.tasks(inQueue: queueName), since: since)
    }

    /// Decodes a queue's stored actions (in position order) and sorts them in run order, the
    /// held action first if one is paused.
    static func entries(from tasks: [StoredTask], since: Duration) -> [Entry] {
        let decoder = JSONDecoder()
        var held: Entry?
        var decoded: [(task: StoredTask, action: Action?)] = []
        for task in tasks {
            let action = try? decoder.decode(Action.self, from: task.payload)
            if task.pause != nil && held == nil {
                held = Entry(task: task, action: action.map { TypedActionBox($0) }, since: since)
            } else {
                decoded.append((task, action))
            }
        }
        // Sorted while still typed (no casts per comparison). `sort` is a stable merge sort in the
        // standard library: equal actions keep enqueue order, as in `runsBefore`.
        decoded.sort { lhs, rhs in
            if let left = lhs.action, let right = rhs.action {
                switch left.sort(right) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: break
                }
            }
            return lhs.task.position < rhs.task.position
        }
        var entries: [Entry] = []
        entries.reserveCapacity(decoded.count + 1)
        if let held { entries.append(held) }
        for item in decoded {
            entries.append(Entry(task: item.task, action: item.action.map { TypedActionBox($0) }, since: since))
        }
        return entries
    }

    /// Loads the queues stored at startup in a background task; each arrives as `.loaded`.
    func startLoading(_ queueNames: [String], in driver: inout Driver) {
        guard !queueNames.isEmpty else { return }
        driver.loading.formUnion(queueNames)
        let storage = self.storage
        let mailbox = self.mailbox
        let since = time.elapsed()
        if let sqlite {
            // One scan for all the queues; each is posted as soon as it is read and decoded.
            Task {
                let unreported = Mutex(Set(queueNames))
                let read: Bool
                do {
                    try await sqlite.readQueues(queueNames) { queueName, tasks in
                        unreported.withLock { _ = $0.remove(queueName) }
                        mailbox.post(.loaded(queueName: queueName, entries: Self.entries(from: tasks, since: since)))
                    }
                    read = true
                } catch {
                    read = false
                }
                // Queues with nothing stored any more are loaded empty; after a failed read, each
                // queue left is read again on its own (`entries: nil`).
                for queueName in unreported.withLock({ $0 }) {
                    mailbox.post(.loaded(queueName: queueName, entries: read ? [] : nil))
                }
            }
            return
        }
        Task {
            for queueName in queueNames {
                let entries = try? await Self.read(queueName, from: storage, since: since)
                mailbox.post(.loaded(queueName: queueName, entries: entries))
            }
        }
    }

    func loaded(_ queueName: String, entries: [Entry]?, in driver: inout Driver) async {
        driver.loading.remove(queueName)
        if driver.dirtyWhileLoading.remove(queueName) != nil || entries == nil {
            // Changed while it loaded (or the read failed): read it again, now.
            await load(queueName, into: &driver)
        } else if let entries {
            install(queueName, entries, in: &driver)
        }
    }

    func load(_ queueName: String, into driver: inout Driver) async {
        guard driver.queues[queueName] == nil, !driver.ignored.contains(queueName) else { return }
        guard claimFilter(queueName), registry.own(queueName, by: brokerID) else {
            driver.ignored.insert(queueName)
            return
        }
        do {
            install(queueName, try await Self.read(queueName, from: storage, since: time.elapsed()), in: &driver)
        } catch {
            logger.error("could not load queue \(queueName): \(error)")
            driver.queues[queueName] = QueueState()
        }
    }

    func install(_ queueName: String, _ entries: [Entry], in driver: inout Driver) {
        var state = QueueState()
        state.loadedThrough = entries.lazy.map(\.task.revision).max() ?? 0
        for entry in entries {
            let id = ActionID(entry.task)
            if let other = driver.locations[id], other != queueName {
                removeEntry(id, revision: nil, in: &driver)
            }
            driver.locations[id] = queueName
        }
        if let first = entries.first, first.task.pause != nil {
            state.held = first
            state.entries = Array(entries.dropFirst())
        } else {
            state.entries = entries
        }
        driver.queues[queueName] = state
        if let held = state.held, case .until(let date) = held.task.pause {
            startTimer(queueName, until: date, in: &driver)
        }
        markReady(queueName, in: &driver)
    }

    static func runsBefore(_ lhs: Entry, _ rhs: Entry) -> Bool {
        if let left = lhs.action, let right = rhs.action {
            switch left.order(before: right) {
            case .orderedAscending: return true
            case .orderedDescending: return false
            case .orderedSame: break
            }
        }
        return lhs.task.position < rhs.task.position
    }

    func markReady(_ queueName: String, in driver: inout Driver) {
        guard let state = driver.queues[queueName], state.inFlight == nil, !state.isEmpty,
              !driver.readySet.contains(queueName) else { return }
        if let held = state.held, held.task.pause != nil { return }
        driver.ready.append(queueName)
        driver.readySet.insert(queueName)
    }

    func startTimer(_ queueName: String, until date: Date, in driver: inout Driver) {
        driver.queues[queueName]?.timer?.task.cancel()
        driver.nextTimerToken += 1
        let token = driver.nextTimerToken
        let delay = Duration(timeInterval: max(0, date.timeIntervalSince(time.now())))
        let sleep = time.sleep
        let mailbox = self.mailbox
        let task = Task {
            do {
                try await sleep(delay)
                mailbox.post(.timer(queueName: queueName, token: token))
            } catch {
                // Cancelled: the queue was resumed, re-saved or the broker stopped.
            }
        }
        driver.queues[queueName]?.timer = (token, task)
    }

    func fireTimer(_ queueName: String, token: UInt64, in driver: inout Driver) {
        guard var state = driver.queues[queueName], state.timer?.token == token else { return }
        state.timer = nil
        state.held?.task.pause = nil
        driver.queues[queueName] = state
        events.yield(.resumed(queueName: queueName))
        markReady(queueName, in: &driver)
    }

    func clearPause(_ queueName: String, in driver: inout Driver) {
        driver.queues[queueName]?.timer?.task.cancel()
        driver.queues[queueName]?.timer = nil
        if driver.queues[queueName]?.held?.task.pause != nil {
            driver.queues[queueName]?.held?.task.pause = nil
            events.yield(.resumed(queueName: queueName))
        }
        markReady(queueName, in: &driver)
    }
}
