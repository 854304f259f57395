"""keyshared on Spark, in three parts by job, over a small shared base.

- `ks_spark.validation`: replay validation of traces (`validate-replay`): the sequence pass, the checker in one
  task or in shards of keys, the catalogue of kinds, the report, and fault-injected twins.
- `ks_spark.dispatcher`: the Spark-backed dispatcher (the `spark` adapter) and the log (WAL) replay through it.
- `ks_spark.capture`: capture of Structured Streaming queries (`watch-stream`), the capture-to-trace mapping,
  and example queries.

The base, at this package's top, is what all three share: starting or joining a session (`session`, with
`log4j2.properties`), progress of Spark's stages (`progress`) and the trace format's Spark schema (`schema`).
The three parts never import each other; each may import the base, and the base imports none of them
(tests/test_independence.py).
"""
