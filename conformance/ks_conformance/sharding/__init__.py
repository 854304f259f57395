"""Judging a trace in shards of keys: the facts that span keys and their prediction (facts.py), its proof (proof.py),
the ops a shard reads a window at a time (ops.py), one shard's checker (shard.py), routing events in memory and
merging the shards' findings (merge.py), and `check-trace --jobs N` on a Parquet trace, routed column by column and
judged in worker processes (run.py)."""
