import Foundation
import Logging
import Metrics
import Synchronization

extension BrokerEngine {
    // MARK: Starting actions

    /// Reserves the heads of ready queues (up to the cap, longest-waiting queue first), claims
    /// them and starts those granted.
    func launchClaim(_ driver: inout Driver) async {
        guard !driver.stopping else { return }
        var picks: [Entry] = []
        while driver.running < configuration.maxConcurrentQueues, !driver.ready.isEmpty {
            let queueName = driver.ready.removeFirst()
            driver.readySet.remove(queueName)
            guard var state = driver.queues.removeValue(forKey: queueName) else { continue }
            defer { driver.queues[queueName] = state }
            guard state.inFlight == nil else { continue }
            if state.held == nil, state.head < state.entries.count {
                // Move the head out of the list; it stays the sticky head until it succeeds.
                state.held = state.entries[state.head]
                state.head += 1
                if state.head > 1024, state.head * 2 > state.entries.count {
                    state.entries.removeFirst(state.head)
                    state.head = 0
                }
            }
            guard let held = state.held, held.task.pause == nil else { continue }
            state.inFlight = held.task
            driver.running += 1
            picks.append(held)
        }
        guard !picks.isEmpty else { return }
        var granted: [Bool]?
        do {
            // The embedded backend grants every claim (one process; the registry keeps brokers
            // apart): skip the call and its allocations.
            granted = sqlite != nil
                ? Array(repeating: true, count: picks.count)
                : try await storage.claim(picks.map(\.task), owner: owner, leaseDuration: configuration.leaseDuration)
        } catch {
            logger.error("could not claim \(picks.count) action(s); their queues wait for restartQueues: \(error)")
        }
        claimed(picks, granted: granted, in: &driver)
    }

    func claimed(_ picks: [Entry], granted: [Bool]?, in driver: inout Driver) {
        var runs: [@Sendable (LaunchGroup) async -> Void] = []
        runs.reserveCapacity(picks.count)
        defer { launch(runs) }
        for (index, pick) in picks.enumerated() {
            let queueName = pick.task.queueName
            let isCurrent = isHeld(pick.task, in: driver)
            guard let granted, granted[index], isCurrent, !driver.stopping else {
                // Not started: give the reservation back.
                driver.queues[queueName]?.inFlight = nil
                driver.running -= 1
                if granted == nil, isCurrent {
                    driver.queues[queueName]?.held?.task.pause = .untilRestart
                } else if granted?[index] == false, isCurrent {
                    // Gone or changed behind our back (another process): drop it, look again.
                    driver.queues[queueName]?.held = nil
                    driver.locations[ActionID(pick.task)] = nil
                }
                markReady(queueName, in: &driver)
                continue
            }
            if let run = start(pick) {
                runs.append(run)
            }
        }
    }

    /// Runs the handlers of one launch from one new task: each starts immediately on it and
    /// continues on its own once it suspends, so a launch costs one task and one thread wake-up
    /// instead of one per action. The outcomes of handlers that finish without suspending reach
    /// the committer together when the launch ends: one wake-up, and they share one commit
    /// instead of the first one going alone.
    func launch(_ runs: [@Sendable (LaunchGroup) async -> Void]) {
        guard !runs.isEmpty else { return }
        Task {
            let group = LaunchGroup()
            for run in runs {
                Task.immediate {
                    await run(group)
                }
            }
            submit(group.close())
        }
    }

    /// Hands outcomes to the committer, or to `group` while its launch is still starting handlers.
    func submit(_ finished: Finished, group: LaunchGroup?) {
        if let group, group.collect(finished) { return }
        submit([finished])
    }

    func submit(_ batch: [Finished]) {
        guard !batch.isEmpty else { return }
        if sqlite != nil {
            committerQueue.push(contentsOf: batch)
        } else {
            committer.post(contentsOf: batch)
        }
    }

    func startCommitterThread(_ sqlite: SQLiteTaskStorage) {
        let queue = committerQueue
        let mailbox = self.mailbox
        let logger = self.logger
        Thread.detachNewThread {
            while let batch = queue.popAll() {
                var succeeded = true
                do {
                    try sqlite.finishBlocking(batch.map(\.outcome))
                } catch {
                    logger.error("could not store \(batch.count) outcome(s); their queues wait for restartQueues: \(error)")
                    succeeded = false
                }
                mailbox.post(.committed(batch, succeeded: succeeded))
            }
        }
    }

    /// Reports the start of an action and returns what runs its handler (`nil` when it cannot run).
    func start(_ entry: Entry) -> (@Sendable (LaunchGroup) async -> Void)? {
        let task = entry.task
        inFlightView.withLock { $0[task.queueName] = task.key }
        let now = time.elapsed()
        queueWait.recordNanoseconds(max(0, (now - entry.since).nanoseconds))
        events.yield(.started(queueName: task.queueName, key: task.key, collection: task.collection, attempt: task.attempts + 1))
        guard let action = (entry.action as? TypedActionBox<Action>)?.value else {
            logger.error("action \(task.collection)/\(task.key) of \(task.queueName) does not decode as \(Action.self); pausing its queue")
            events.yield(.undecodable(queueName: task.queueName, key: task.key, collection: task.collection))
            submit([Finished(task: task, result: .waitForRestart, pause: .untilRestart)])
            return nil
        }
        let run = self.run
        let time = self.time
        let handleDuration = self.handleDuration
        let context = TaskContext(queueName: task.queueName, key: task.key, collection: task.collection, attempt: task.attempts + 1)
        return { [self] group in
            let result = await run(action, context)
            handleDuration.recordNanoseconds(max(0, (time.elapsed() - now).nanoseconds))
            let pause: TaskPause?
            switch result {
            case .success: pause = nil
            case .retry(let after): pause = after > .zero ? .until(time.now().addingTimeInterval(after.timeInterval)) : nil
            case .waitForRestart: pause = .untilRestart
            }
            // Straight to the committer (through the launch's group while the launch runs): outcomes
            // that arrive while a commit runs share the next one.
            submit(Finished(task: task, result: result, pause: pause), group: group)
        }
    }
}
