// `import TaskBroker` is the whole library with its embedded default: the engine and its API
// (TaskBrokerCore) and the SQLite backend (TaskBrokerSQLite, `TaskDatabase.sqlite(path:)`).
// A program on PostgreSQL only may import TaskBrokerCore and TaskBrokerPostgres instead, and
// never compiles GRDB.
@_exported public import TaskBrokerCore
@_exported public import TaskBrokerSQLite
