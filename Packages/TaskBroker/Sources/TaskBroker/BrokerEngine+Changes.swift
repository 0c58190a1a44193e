import Foundation
import Logging

extension BrokerEngine {
    // MARK: Changes made through the database

    func apply(_ changes: [TaskChange], to driver: inout Driver) async {
        for change in changes {
            let touched: [String]
            switch change {
            case .saved(let task), .deleted(let task): touched = [task.queueName]
            case .resumed(let queueNames, _): touched = queueNames
            case .purged(let queueName): touched = [queueName]
            }
            let stale = touched.filter { driver.loading.contains($0) }
            driver.dirtyWhileLoading.formUnion(stale)
            if case .saved(let task) = change, isOutdated(task, in: driver) {
                // A load already read this save (or a newer version): applying it again would
                // put a second copy in the queue, even while the first one runs.
                continue
            }
            if !stale.isEmpty, case .saved(let task) = change {
                // Forget an older version elsewhere; the reload of its new queue has it.
                removeEntry(ActionID(task), revision: nil, in: &driver)
                continue
            }
            if !stale.isEmpty, case .deleted = change { continue }
            if !stale.isEmpty, case .purged = change { continue }
            switch change {
            case .saved(let task):
                removeEntry(ActionID(task), revision: nil, in: &driver)
                if driver.queues[task.queueName] == nil {
                    // A queue this broker has not seen yet: load it (the load includes this save).
                    await load(task.queueName, into: &driver)
                    continue
                }
                guard var state = driver.queues.removeValue(forKey: task.queueName) else { continue }
                let entry = Entry(
                    task: task, action: (try? driver.decoder.decode(Action.self, from: task.payload)).map { TypedActionBox($0) }, since: time.elapsed()
                )
                // Binary search for the first entry the new one runs before; equal ones stay in front.
                var low = state.head
                var high = state.entries.count
                while low < high {
                    let middle = (low + high) / 2
                    if Self.runsBefore(entry, state.entries[middle]) { high = middle } else { low = middle + 1 }
                }
                state.entries.insert(entry, at: low)
                driver.queues[task.queueName] = state
                driver.locations[ActionID(task)] = task.queueName
                markReady(task.queueName, in: &driver)
            case .deleted(let task):
                removeEntry(ActionID(task), revision: task.revision, in: &driver)
            case .resumed(let queueNames, _):
                for queueName in queueNames where driver.queues[queueName] != nil {
                    clearPause(queueName, in: &driver)
                }
            case .purged(let queueName):
                guard var state = driver.queues[queueName] else { continue }
                state.timer?.task.cancel()
                state.timer = nil
                state.entries = []
                state.head = 0
                state.held = nil
                driver.queues[queueName] = state
                driver.locations = driver.locations.filter { $0.value != queueName }
            }
        }
    }

    /// Whether a save's notification arrives after the broker already knows that version or a
    /// newer one. Notifications are sent after the commit, so a load can read a save before its
    /// notification arrives (a new queue is loaded when its first save arrives; the startup load
    /// reloads queues that changed while they were read).
    func isOutdated(_ task: StoredTask, in driver: Driver) -> Bool {
        if let state = driver.queues[task.queueName], task.revision <= state.loadedThrough {
            return true
        }
        guard let revision = knownRevision(of: ActionID(task), in: driver) else { return false }
        return task.revision <= revision
    }

    /// The revision of the version of an action the broker holds (waiting, held or running).
    func knownRevision(of id: ActionID, in driver: Driver) -> Int64? {
        guard let queueName = driver.locations[id], let state = driver.queues[queueName] else { return nil }
        if let held = state.held, ActionID(held.task) == id { return held.task.revision }
        return state.entries[state.head...].first { ActionID($0.task) == id }?.task.revision
    }

    /// Removes the stored version of an action (any version when `revision` is `nil`) from
    /// whichever queue holds it.
    func removeEntry(_ id: ActionID, revision: Int64?, in driver: inout Driver) {
        guard let queueName = driver.locations[id], var state = driver.queues.removeValue(forKey: queueName) else { return }
        defer { driver.queues[queueName] = state }
        if let held = state.held, ActionID(held.task) == id, revision == nil || held.task.revision == revision {
            driver.locations[id] = nil
            state.held = nil
            state.timer?.task.cancel()
            state.timer = nil
            if state.inFlight == nil, !state.isEmpty, !driver.readySet.contains(queueName) {
                driver.ready.append(queueName)
                driver.readySet.insert(queueName)
            }
            return
        }
        if let index = state.entries[state.head...].firstIndex(where: {
            ActionID($0.task) == id && (revision == nil || $0.task.revision == revision)
        }) {
            driver.locations[id] = nil
            state.entries.remove(at: index)
        }
    }
}
