import Foundation
import Instrumentation
import Tracing

/// The trace context an action carries from its save to its runs, so that a trace crosses
/// processes: the propagation headers of the instrument the application bootstrapped (W3C
/// `traceparent` with swift-otel, say), stored as JSON with the action. Empty, and stored as
/// nothing, unless the application bootstrapped an instrument (`InstrumentationSystem`).
enum TraceCarrier {
    /// The current task's context, as headers (empty without one, or without an instrument).
    static func current() -> [String: String] {
        guard let context = InstrumentationContext.current else { return [:] }
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: DictionaryInjector())
        return carrier
    }

    /// The context a stored action's work runs under: the headers its save stored, extracted.
    static func context(from carrier: [String: String]) -> InstrumentationContext {
        var context = InstrumentationContext.topLevel
        guard !carrier.isEmpty else { return context }
        InstrumentationSystem.instrument.extract(carrier, into: &context, using: DictionaryExtractor())
        return context
    }

    /// What a run's handler reported, on its span: a failed attempt is an error.
    static func record(_ result: TaskResult, reason: String?, in span: any Span) {
        // Nothing to build for a span nobody records (no tracer bootstrapped): every run passes here.
        guard span.isRecording else { return }
        let outcome: String
        switch result {
        case .success: outcome = "success"
        case .retry: outcome = "retry"
        case .waitForRestart: outcome = "wait for restart"
        case .deadLetter(let why): outcome = "dead letter: \(why)"
        }
        span.attributes["taskbroker.result"] = reason ?? outcome
        if result != .success { span.setStatus(SpanStatus(code: .error, message: reason ?? outcome)) }
    }

    /// Links `span` (a claim's or an outcome batch's) to the traces of the actions it concerns.
    static func link(_ span: any Span, to tasks: some Sequence<StoredTask>) {
        guard span.isRecording else { return }
        for task in tasks where !task.traceContext.isEmpty {
            span.addLink(SpanLink(context: context(from: task.traceContext), attributes: [:]))
        }
    }

    /// Names the action on its run's span (nothing for a span nobody records).
    static func name(_ task: StoredTask, on span: any Span) {
        guard span.isRecording else { return }
        span.attributes["taskbroker.queue"] = task.queueName
        span.attributes["taskbroker.key"] = task.key
        span.attributes["taskbroker.collection"] = task.collection
        span.attributes["taskbroker.attempt"] = task.nextAttempt
    }
}

struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        carrier[key] = value
    }
}

struct DictionaryExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? {
        carrier[key]
    }
}

/// How a backend stores an action's trace context (``NewTask/traceContext``): one text column.
public enum TaskTraceHeaders: Sendable {
    /// The stored form: sorted-key JSON, `nil` for no headers.
    ///
    /// - Parameter headers: The propagation headers.
    /// - Returns: The text to store, or `nil` (store nothing) when there are none.
    public static func encoded(_ headers: [String: String]) -> String? {
        guard !headers.isEmpty else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(headers)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The headers of a stored form. A value that is not such JSON (a row changed outside
    /// QueueKit) loses its trace link, never its action: no headers.
    ///
    /// - Parameter text: The stored text, if any.
    /// - Returns: The propagation headers (empty for none).
    public static func decoded(_ text: String?) -> [String: String] {
        guard let text, !text.isEmpty else { return [:] }
        return (try? JSONDecoder().decode([String: String].self, from: Data(text.utf8))) ?? [:]
    }
}
