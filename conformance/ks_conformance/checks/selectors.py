"""What the checker knows of the selectors themselves (spec sections 5 and 17): which hold keys stable across a
membership change, the slots of the hash space, which member a bucket belongs to, and the reasons a best-effort
selector may drop a message. No state: the rules import it.
"""

from __future__ import annotations

STABLE_SELECTORS = frozenset(
    {"ring", "pulsar-consistent", "pulsar-auto-split", "pulsar-sticky", "danube", "partitions"}
)
"""The selectors KS-ASN-2 holds to: a membership change moves a key only to a joiner or away from a leaver
(under `partitions` only away from a leaver, KS-ASN-11)."""
SLOTS = 65536
"""The slots of the hash space a consumer's ranges cover (KS-ASN-6, KS-DRN-3)."""


def bucket_owner(bucket: int, buckets: int, names: list[str], segment: int = 0) -> str:
    """KS-BKT-3: the member that is the target of a bucket of segment `segment` with N buckets: position j in the
    segment's order (the names sorted, rotated by the segment's number) owns floor(j*N/k) to floor((j+1)*N/k) - 1."""
    count = len(names)
    order = names[segment % count :] + names[: segment % count]
    for j, name in enumerate(order):
        if j * buckets // count <= bucket < (j + 1) * buckets // count:
            return name
    return order[-1]


BEST_EFFORT_DROPS = frozenset({"saturated", "inactive", "no-consumer"})
"""The reasons a best-effort dispatcher may drop a message (spec section 18); other systems may not (KS-RES-1)."""
