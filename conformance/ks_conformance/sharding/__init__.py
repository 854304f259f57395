"""Judging a trace in shards of keys: the router (route.py), the facts that span keys (facts.py), one shard's
checker (shard.py), and the merge of the shards' findings (merge.py)."""
