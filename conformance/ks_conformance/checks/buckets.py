"""spec/checking.md section 2.1, buckets (section 17 of the spec): the handoff events `bucket_withheld` and
`bucket_assigned`, judged by the buckets section's checks (`ks_conformance.rules.buckets`).
"""

from __future__ import annotations

from ks_conformance import rules
from ks_conformance.checks.state import CheckerState, Event


def on_bucket_withheld(st: CheckerState, event: Event) -> None:
    st.withheld_buckets.add((int(event["segment"]), int(event["bucket"])))
    rules.buckets.bucket_decision(st, event)


def on_bucket_assigned(st: CheckerState, event: Event) -> None:
    st.withheld_buckets.discard((int(event["segment"]), int(event["bucket"])))
    rules.buckets.bucket_decision(st, event)
