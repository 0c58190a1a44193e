# Sourced by the other scripts: the packages in dependency order (each after what it uses).
PACKAGES=(AsyncPrimitives QueueCore QueueRetry QueuePersistence JobChain TaskBroker)
