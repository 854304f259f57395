"""The Spark-backed dispatcher: per-key engines (`engine`) run as Spark jobs (`runner`), behind the adapter
protocol (`adapter`), and a log replayed through it into a trace (`walreplay`, `keyshared spark-dispatch`)."""
