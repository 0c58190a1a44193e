/// An error the tool reports as one line on stderr, with a non-zero exit status.
struct QueuekitError: Error, CustomStringConvertible {
    var message: String
    /// The process exit status: 1 for a failure, 64 for bad usage (as `sysexits.h` says).
    var exitCode: Int32 = 1

    init(_ message: String, exitCode: Int32 = 1) {
        self.message = message
        self.exitCode = exitCode
    }

    var description: String { message }
}
