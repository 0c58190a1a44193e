import Dispatch

/// Where a command runs.
enum Place: Sendable, Equatable {
    case global(DispatchQoS.QoSClass)
    case main
    case custom(String)
}

/// The user code of a command.
enum Body: Sendable {
    case sync(@Sendable () throws -> Void)
    case async(@Sendable () async throws -> Void)
}

/// One queued command: where it runs, how long to wait first, and what it does.
struct Command: Sendable {
    let place: Place
    /// How long to wait, counted from when the previous command finished.
    let delay: Duration
    let body: Body

    var isMain: Bool { place == .main }

    /// Whether it runs on a custom tagged queue, where it may wait behind other jobs' commands.
    var isCustom: Bool {
        if case .custom = place { true } else { false }
    }
}

/// A command picked to run, with the attempt number that identifies this try.
struct Execution: Sendable {
    let command: Command
    let attempt: UInt64
}

/// A first-in first-out list of commands with O(1) removal at the front.
struct CommandList: Sendable {
    private var storage: [Command] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }
    var first: Command? { isEmpty ? nil : storage[head] }

    mutating func append(_ command: Command) {
        storage.append(command)
    }

    mutating func removeFirst() {
        guard !isEmpty else { return }
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.count <= 1024)
            head = 0
        } else if head >= 1024, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }

    /// Drops every command after the first.
    mutating func removeAllButFirst() {
        guard let first else { return }
        storage = [first]
        head = 0
    }

    mutating func removeAll() {
        storage = []
        head = 0
    }

    /// The number of commands that must run on the main queue.
    func count(where predicate: (Command) -> Bool) -> Int {
        var total = 0
        for index in head..<storage.count where predicate(storage[index]) {
            total += 1
        }
        return total
    }
}
