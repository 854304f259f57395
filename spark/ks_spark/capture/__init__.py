"""Capture of Spark Structured Streaming queries (`keyshared watch-stream`, spec/streaming.md): the three calls a
query adds (`recorder`), running a query module under them (`watch`), the capture folder turned into a trace
(`streamtrace`), and example queries (`examples`)."""
