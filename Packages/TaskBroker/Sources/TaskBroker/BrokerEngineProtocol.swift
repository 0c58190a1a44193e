/// The part of a broker that does not depend on the handler's type.
protocol BrokerEngineProtocol: Sendable {
    var name: String { get }
    var events: EventBroadcaster { get }
    var finished: Latch { get }
    func stop(abandon: Bool)
    func inFlight() -> [String: String]
    func accepts(_ queueName: String) -> Bool
}
