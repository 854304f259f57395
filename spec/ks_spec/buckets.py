"""Spec section 17 as functions: the 32-bit hash of a key and where it routes (KS-BKT-1).

The harness needs them to know which keys a batch may hold (one bucket of one segment) and what its effective range
is; the checkers judge placements with the same arithmetic.
"""

from __future__ import annotations

import mmh3


def bucket_hash(key: str) -> int:
    """H = murmur3_32(utf8(key), seed 0), unsigned: its high 16 bits pick the segment, its low 16 bits are hashB."""
    return int(mmh3.hash(key.encode("utf-8"), 0, signed=False))


def bucket_index(hash_b: int, buckets: int) -> int:
    """The bucket floor(hashB * N / 65536) of a segment with N buckets."""
    return hash_b * buckets // 65536
