/// The queues whose heads may run, waiting for a slot: by their head's priority (larger first),
/// then in the order they became ready. Within a priority, a queue that ran goes to the back, so
/// that a long queue does not starve the short ones of its priority.
struct ReadyLine {
    /// One first-in, first-out line per priority that has queues, largest priority first (usually
    /// one line: priority 0).
    private var lines: [(priority: Int, line: FIFO)] = []
    private var members: Set<String> = []

    /// How many queues wait.
    var count: Int { members.count }
    var isEmpty: Bool { members.isEmpty }

    func contains(_ queueName: String) -> Bool {
        members.contains(queueName)
    }

    /// Puts a queue at the back of its priority's line, or at its front when `first`.
    mutating func insert(_ queueName: String, priority: Int, first: Bool = false) {
        guard members.insert(queueName).inserted else { return }
        var index = lines.startIndex
        while index < lines.endIndex, lines[index].priority > priority {
            index += 1
        }
        if index == lines.endIndex || lines[index].priority != priority {
            lines.insert((priority, FIFO()), at: index)
        }
        if first {
            lines[index].line.prepend(queueName)
        } else {
            lines[index].line.append(queueName)
        }
    }

    /// Takes the first queue of the highest priority.
    mutating func popFirst() -> String? {
        guard !lines.isEmpty else { return nil }
        let queueName = lines[0].line.popFirst()
        if lines[0].line.isEmpty { lines.removeFirst() }
        if let queueName { members.remove(queueName) }
        return queueName
    }

    /// Names in arrival order from `head` on: an array that drops its taken prefix once it is
    /// more than half of it (amortised O(1) per operation).
    struct FIFO {
        private var names: [String] = []
        private var head = 0

        var isEmpty: Bool { head == names.count }

        mutating func append(_ name: String) {
            names.append(name)
        }

        mutating func prepend(_ name: String) {
            if head > 0 {
                head -= 1
                names[head] = name
            } else {
                names.insert(name, at: 0)
            }
        }

        mutating func popFirst() -> String? {
            guard head < names.count else { return nil }
            let name = names[head]
            head += 1
            if head == names.count {
                names.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 1024, head * 2 > names.count {
                names.removeFirst(head)
                head = 0
            }
            return name
        }
    }
}
