"""The hash functions and slot arithmetic of the selectors (spec section 4 and 17).

Pure helpers carry PEP 316 contracts (`pre:` / `post:` in the docstring) that
`crosshair check --analysis_kind=PEP316` proves or searches; see tests/test_reference_contracts.py.
"""

from __future__ import annotations

import mmh3

MASK32 = 0xFFFFFFFF
FNV64_OFFSET_BASIS = 0xCBF29CE484222325
FNV64_PRIME = 0x100000001B3
PULSAR_CONSISTENT_RANGE = 65535
"""Pulsar's consistent-hashing selector reduces over the inclusive range [1, 65535]."""
PULSAR_RANGE_SIZE = 65536
"""Pulsar's auto-split and sticky selectors reduce over the inclusive range [0, 65535]."""


def murmur3_32(text: str) -> int:
    """MurmurHash3 x86 32-bit, seed 0, of the UTF-8 bytes, as an unsigned integer (KS-ASN-4, KS-BKT-1)."""
    return mmh3.hash(text.encode("utf-8"), 0, signed=False)


def pulsar_consistent_slot_of_hash(hash32: int) -> int:
    """The consistent-hashing slot of a murmur3 value: `(h & 0x7FFFFFFF) % 65535 + 1` (KS-ASN-5).

    pre: 0 <= hash32 <= 0xFFFFFFFF
    post: 1 <= __return__ <= 65535
    """
    return (hash32 & 0x7FFFFFFF) % PULSAR_CONSISTENT_RANGE + 1


def pulsar_range_slot_of_hash(hash32: int) -> int:
    """The auto-split and sticky slot of a murmur3 value: `(h & 0x7FFFFFFF) % 65536`, 0 becoming 1 (KS-ASN-6).

    pre: 0 <= hash32 <= 0xFFFFFFFF
    post: 1 <= __return__ <= 65535
    post: __return__ == ((hash32 & 0x7FFFFFFF) % 65536 or 1)
    """
    slot = (hash32 & 0x7FFFFFFF) % PULSAR_RANGE_SIZE
    return slot if slot != 0 else 1


def pulsar_consistent_slot(text: str) -> int:
    """The consistent-hashing slot of a key or a point string (KS-ASN-5)."""
    return pulsar_consistent_slot_of_hash(murmur3_32(text))


def pulsar_range_slot(text: str) -> int:
    """The auto-split and sticky slot of a key (KS-ASN-6, KS-ASN-7)."""
    return pulsar_range_slot_of_hash(murmur3_32(text))


def fnv1a_64(data: bytes) -> int:
    """FNV-1a, 64-bit, over the bytes (offset basis 0xcbf29ce484222325, prime 0x100000001b3)."""
    value = FNV64_OFFSET_BASIS
    for byte in data:
        value = ((value ^ byte) * FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
    return value


def fold_64_to_32(value: int) -> int:
    """Fold a 64-bit value to 32 bits as `(x >> 32) ^ x`, keeping the low 32 bits.

    pre: 0 <= value <= 0xFFFFFFFFFFFFFFFF
    post: 0 <= __return__ <= 0xFFFFFFFF
    post: __return__ == ((value >> 32) ^ (value & 0xFFFFFFFF))
    """
    return ((value >> 32) ^ value) & MASK32


def fmix32(value: int) -> int:
    """The murmur3 32-bit finalizer: mixes every input bit into every output bit.

    pre: 0 <= value <= 0xFFFFFFFF
    post: 0 <= __return__ <= 0xFFFFFFFF
    """
    value ^= value >> 16
    value = (value * 0x85EBCA6B) & MASK32
    value ^= value >> 13
    value = (value * 0xC2B2AE35) & MASK32
    value ^= value >> 16
    return value


def danube_hash(text: str) -> int:
    """Danube's ring hash: FNV-1a 64 over UTF-8, folded to 32 bits, then fmix32 (KS-ASN-8)."""
    return fmix32(fold_64_to_32(fnv1a_64(text.encode("utf-8"))))


def bucket_of(hash_b: int, buckets: int) -> int:
    """The bucket of a low-16-bit hash in a segment of `buckets` equal-width buckets (KS-BKT-1).

    pre: 0 <= hash_b <= 0xFFFF
    pre: 1 <= buckets <= 65536
    post: 0 <= __return__ < buckets
    post: __return__ * 65536 <= hash_b * buckets < (__return__ + 1) * 65536
    """
    return hash_b * buckets // 65536


def bucket_hash_range(bucket: int, buckets: int) -> tuple[int, int]:
    """The inclusive range of low-16-bit hashes that fall in `bucket` (empty when lo > hi).

    pre: 1 <= buckets <= 65536
    pre: 0 <= bucket < buckets
    post: __return__[0] == 0 or bucket_of(__return__[0] - 1, buckets) < bucket
    post: __return__[0] > __return__[1] or bucket_of(__return__[0], buckets) == bucket
    post: __return__[0] > __return__[1] or bucket_of(__return__[1], buckets) == bucket
    post: __return__[1] == 0xFFFF or bucket_of(__return__[1] + 1, buckets) > bucket
    """
    lo = -(-bucket * 65536 // buckets)
    hi = -(-(bucket + 1) * 65536 // buckets) - 1
    return lo, hi


def split_hash(hash32: int) -> tuple[int, int]:
    """Split a 32-bit hash into its segment-routing high half and its bucket-picking low half (spec 17).

    pre: 0 <= hash32 <= 0xFFFFFFFF
    post: __return__[0] * 65536 + __return__[1] == hash32
    post: 0 <= __return__[1] <= 0xFFFF
    """
    return hash32 >> 16, hash32 & 0xFFFF


def bucket_owner_index(bucket: int, buckets: int, members: int) -> int:
    """Which of `members` name-sorted members owns `bucket`: j with floor(j*N/k) <= b < floor((j+1)*N/k) (KS-BKT-3).

    pre: 1 <= buckets <= 65536
    pre: 0 <= bucket < buckets
    pre: 1 <= members <= 100000
    post: 0 <= __return__ < members
    post: __return__ * buckets // members <= bucket < (__return__ + 1) * buckets // members
    """
    return ((bucket + 1) * members - 1) // buckets


def owned_buckets(index: int, buckets: int, members: int) -> range:
    """The buckets member `index` (0-based, name order) owns: floor(j*N/k) to floor((j+1)*N/k) - 1 (KS-BKT-3).

    pre: 1 <= buckets <= 65536
    pre: 1 <= members <= 100000
    pre: 0 <= index < members
    post: all(bucket_owner_index(b, buckets, members) == index for b in __return__)
    """
    return range(index * buckets // members, (index + 1) * buckets // members)
