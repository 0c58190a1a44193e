import ArgumentParser
import Foundation

/// The `queuekit` tool: the end-to-end demo and a small admin CLI over a TaskBroker database.
struct Queuekit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queuekit",
        abstract: "Durable upload queues on an embedded SQLite file or PostgreSQL: the QueueKit demo and its admin commands.",
        discussion: """
            Every command takes --database sqlite:PATH (default: sqlite:./queuekit-demo.sqlite) \
            or --database postgres://USER:PASSWORD@HOST:PORT/DATABASE, where `queuekit work` \
            processes on any number of machines share the queues.
            Uploads of user U run in order on the queue uploads-U; an upload that fails \
            --max-attempts times becomes a dead letter of its queue, run again only by `queuekit retry`.
            `queues`, `actions`, `show`, `dead-letters`, `replay`, `discard`, `delete`, `pause`, `resume` and `schedules` \
            work on any TaskBroker database, whatever its action types (payloads are shown as \
            stored JSON; --json for scripts).
            """,
        subcommands: [
            Demo.self, DemoCluster.self, Soak.self, Enqueue.self, Work.self, List.self, Stats.self, Retry.self, Purge.self,
            Pause.self, Resume.self, Queues.self, Actions.self, Show.self, DeadLetters.self, Replay.self, Discard.self, Delete.self,
            Schedules.self, Serve.self,
        ]
    )
}

/// The `queuekit` tool's entry point, in a library so that the fuzz targets (`Fuzz/`) link the
/// same argument parsing the executable runs.
public enum QueuekitTool: Sendable {
    /// Parses `CommandLine.arguments`, runs the command and turns every failure into one line
    /// on stderr and a non-zero exit status (never a stack trace); exits the process when the
    /// command fails.
    public static func main() async {
        do {
            var command = try Queuekit.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as ExitCode {
            exit(error.rawValue)
        } catch let error as QueuekitError {
            fail(error.message, status: error.exitCode)
        } catch {
            let status = Queuekit.exitCode(for: error)
            if status == .success {
                // --help and --version are not failures.
                Queuekit.exit(withError: error)
            }
            // Without a URL's password: the argument parser quotes what was typed
            // (`Unexpected argument 'postgres://app:secret@…'`, a URL given without --database).
            let message = DatabaseLocation.redacted(
                Queuekit.message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            )
            fail("\(message.replacingOccurrences(of: "Error: ", with: "")) (see `queuekit help`)", status: status.rawValue)
        }
    }

    private static func fail(_ message: String, status: Int32) -> Never {
        try? FileHandle.standardError.write(contentsOf: Data("queuekit: \(message)\n".utf8))
        exit(status == 0 ? 1 : status)
    }
}

/// Writes a line to stdout at once (unbuffered, so lines keep their order with the progress line).
/// A reader that went away (`queuekit queues | head`) loses the rest; the command goes on.
func say(_ text: String = "") {
    try? FileHandle.standardOutput.write(contentsOf: Data((text + "\n").utf8))
}
