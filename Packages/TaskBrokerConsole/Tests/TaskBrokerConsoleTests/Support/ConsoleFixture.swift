import Foundation
import Hummingbird
import HummingbirdTesting
import TaskBroker
import TaskBrokerConsole

/// An application's action, as any TaskBroker user writes one.
struct Note: TaskQueueAction, Equatable {
    var key: String
    var collection = "notes"
    var queueName: String
    var text: String
}

/// A TaskBroker database in a folder of its own, the console over it, and a Hummingbird
/// application serving the console's routes (tested through Hummingbird's router test client).
struct ConsoleFixture: Sendable {
    let folder: URL
    let database: TaskDatabase
    let console: TaskBrokerConsole

    init(configuration: TaskBrokerConsole.Configuration = .init()) async throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("taskbroker-console-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        database = try await TaskDatabase.sqlite(path: folder.appendingPathComponent("tasks.sqlite").path)
        console = TaskBrokerConsole(database: database, configuration: configuration)
    }

    /// Runs `body` with a client of an application that serves the console at the root.
    func withClient<T: Sendable>(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> T) async throws -> T {
        let router = Router()
        console.addRoutes(to: router)
        return try await Application(router: router).test(.router, body)
    }

    /// Moves `note` to the dead letters as a broker does: saved, run once by a handler that
    /// sends it there with `reason`.
    func deadLetter(_ note: Note, reason: String) async throws {
        let broker = try await TaskQueueBroker.setup(
            database: database, name: note.queueName, handler: DeadLetteringHandler(reason: reason)
        )
        // Listens before saving, so that the event cannot pass unheard.
        let events = broker.events
        try await database.save(note)
        for await event in events {
            if case .deadLettered(_, let key, _, _) = event, key == note.key { break }
        }
        await broker.shutdown()
    }

    /// Removes the database's folder.
    func remove() {
        try? FileManager.default.removeItem(at: folder)
    }
}

/// Sends every action to the dead letters.
final class DeadLetteringHandler: AsyncTaskQueueHandler {
    let reason: String

    init(reason: String) {
        self.reason = reason
    }

    func handle(_ action: Note, context: TaskContext) async -> TaskResult {
        .deadLetter(reason: reason)
    }
}

/// Completes every action.
final class SucceedingHandler: AsyncTaskQueueHandler {
    func handle(_ action: Note, context: TaskContext) async -> TaskResult {
        .success
    }
}

extension TestResponse {
    /// The body as text.
    var text: String { String(buffer: body) }

    /// The body's text without its tags, as a reader sees it (entities left as they are).
    var plainText: String { text.replacingOccurrences(of: "<[^>]+>", with: "", options: .regularExpression) }
}

extension TestClientProtocol {
    /// A page (`GET`).
    func get(_ uri: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        try await execute(uri: uri, method: .get, headers: headers)
    }

    /// A form post, its fields URL-encoded.
    func post(_ uri: String, _ fields: [(String, String)], headers: HTTPFields = [:]) async throws -> TestResponse {
        var all = headers
        all[.contentType] = "application/x-www-form-urlencoded"
        let body = fields.map { "\(formEncoded($0.0))=\(formEncoded($0.1))" }.joined(separator: "&")
        return try await execute(uri: uri, method: .post, headers: all, body: ByteBuffer(string: body))
    }
}

/// `text` encoded for a form field.
func formEncoded(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? ""
}

/// The CSRF token that a page's forms carry.
func csrfToken(in page: String) -> String? {
    guard let range = page.range(of: "name=\"csrf\" value=\"") else { return nil }
    return String(page[range.upperBound...].prefix { $0 != "\"" })
}
