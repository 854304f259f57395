"""Example streaming pipelines run under capture (spec/streaming.md): `keyed_totals` and its broken variants."""
