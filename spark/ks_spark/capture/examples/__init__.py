"""Example streaming pipelines run under capture (spec/streaming.md): `keyed_totals` and `balances`, each with its
broken variants, and what they share (`common`)."""
