"""The hash slots of the selectors that map keys to slots (spec KS-ASN-5 to KS-ASN-7), as the spec defines them.

The checkers need a key's slot to judge hash-granularity draining (KS-DRN-3); this is the spec's formula,
written here so that no checker has to import an implementation's selector code.
"""

from __future__ import annotations

from functools import cache

import mmh3

SLOT_SELECTORS = ("pulsar-consistent", "pulsar-auto-split", "pulsar-sticky")
"""The selectors whose keys fall into numbered slots, where `drain_granularity = "hash"` applies."""


@cache
def slot_of(selector: str, key: str) -> int:
    """The slot of `key` under a slot selector: its consistent-hashing slot (KS-ASN-5) or its range slot (KS-ASN-6)."""
    value = mmh3.hash(key.encode("utf-8"), 0, signed=False) & 0x7FFFFFFF
    if selector == "pulsar-consistent":
        return value % 65535 + 1
    if selector in ("pulsar-auto-split", "pulsar-sticky"):
        return value % 65536 or 1
    raise ValueError(f"selector {selector!r} has no slots (slot selectors: {', '.join(SLOT_SELECTORS)})")
