"""The capability slices mutants are run with: what each declares beyond (or instead of) the reference's capabilities.

A slice narrows what the suite draws so that a mutant's bug is found within the `ci` profile; it is declared
honestly, like any adapter's capabilities. A mutant names its slice in its `@mutant(...)` registration in bugs.py.
"""

from __future__ import annotations

from typing import Any

from ks_reference.adapter import CAPABILITIES
from ks_reference.dispatcher import OPS

WITHOUT_ZOMBIES: dict[str, Any] = {
    "ops": [op for op in OPS if op not in ("zombie_ack", "zombie_nack", "publish_delayed", "seek", "extend")],
    "shared_names": False,
    "key_batches": False,
    "config_values": {
        k: v
        for k, v in CAPABILITIES["config_values"].items()
        if k not in ("ack_by_id", "persist_trigger", "persist_flush", "layout")
    },
}
"""What a mutant declares unless its slice says otherwise: the reference's ops and options without those added
since 1.6 (the zombie ops and `ack_by_id`, KS-ACK-3; `publish_delayed`, KS-ORD-5; `seek`, section 14; `extend`,
KS-RTY-8; the debounce options, KS-CUR-12; the reported layout, KS-BKT-11; shared consumer names, KS-ASN-5;
key-based batches and batches under permits or the look-ahead, `key_batches`, section 17), which
change how Hypothesis draws every example; only the mutants that test them draw them, so every other mutant's search
stays as tuned."""
OWNER: dict[str, Any] = {"profiles": ["owner"]}
STRICT: dict[str, Any] = {"profiles": ["strict"]}
RING: dict[str, Any] = {"selectors": ["ring"]}
BUCKETS: dict[str, Any] = {"selectors": ["buckets"]}
BASE: dict[str, Any] = {**OWNER, **RING, "poison_policies": ["drop"], "config_values": {}}
"""The slice most mutants are run with: one profile, one selector, one poison policy, and none of the options
the reference declares (`tick_order` stays standard: Danube's order would spend examples most bugs do not need)."""
ZOMBIES: dict[str, Any] = {**BASE, "ops": [op for op in OPS if op not in ("publish_delayed", "seek", "extend")]}
"""The reference's ops, the zombie ops (KS-ACK-3) included: only the mutants that test them draw them."""
DELAYED: dict[str, Any] = {
    **BASE,
    "ops": [op for op in OPS if op not in ("zombie_ack", "zombie_nack", "seek", "extend")],
}
"""The reference's ops with delayed delivery (`publish_delayed`, KS-ORD-5 to KS-ORD-7): only the mutants that test
it draw it."""
EXTENSIONS: dict[str, Any] = {
    **BASE,
    "ops": [op for op in OPS if op not in ("zombie_ack", "zombie_nack", "publish_delayed", "seek")],
}
"""The reference's ops with `extend` (KS-RTY-8), without the zombie ops: only the extension mutants draw it."""
ACK_BY_ID: dict[str, Any] = {**ZOMBIES, "config_values": {"ack_by_id": [True]}}
"""Acknowledging by message id (spec section 20): a zombie ack of an unresolved message resolves it."""
SEEK: dict[str, Any] = {
    **BASE,
    "ops": [op for op in OPS if op not in ("zombie_ack", "zombie_nack", "publish_delayed", "extend")],
}
"""The reference's ops with `seek` (section 14), without the zombie ops: only the mutants that test it draw it."""
SEEK_DEBOUNCED: dict[str, Any] = {**SEEK, "config_values": {"persist_interval": [2, 3]}}
"""A seek under a debounced cursor (`persist_interval` above 0): its own write must not wait (KS-CUR-10)."""
CHECKPOINTS: dict[str, Any] = {"checkpoint_resume": [True], "bucket_budget": [2, 4], "persist_interval": [0, 1]}
"""Restarts that resume buckets from their checkpoints (spec section 17): more than one bucket, so that one can be
checkpointed past a message of another that holds the cursor back."""
PERMITS: dict[str, Any] = {**BASE, "config_values": {"flow_control": ["permits"]}}
"""Pulsar's permits (spec section 8): `capacity` is a first grant, and the kit draws `flow` ops."""
LOOKAHEAD: dict[str, Any] = {
    **BASE,
    "config_values": {
        "read_bound": ["lookahead"],
        "lookahead_per_consumer": [1, 2],
        "lookahead_per_subscription": [3, 0],
    },
}
"""Pulsar's look-ahead limits (spec section 8) instead of the window."""
KEY_BATCHES: dict[str, Any] = {**BASE, "key_batches": True}
"""Key-based batches (spec section 17, PIP-34): the repeats of a burst's first key are published as one entry."""
KEY_BATCH_PERMITS: dict[str, Any] = {**KEY_BATCHES, "config_values": {"flow_control": ["permits"]}}
"""Key-based batches under Pulsar's permits: a batch needs one permit and is charged whole (KS-FLW-4)."""
PARKING: dict[str, Any] = {**BASE, "config_values": {"park_after": [1, 2]}}
"""Parking a hot key's backlog (spec section 15): the kit draws `park_after` 1 or 2 in every example."""
HEARTBEAT_READS: dict[str, Any] = {**BASE, "config_values": {"read_trigger": ["heartbeat"]}}
"""Danube's heartbeat reads (KS-GEN-8): only a tick's dispatch pass must read new messages."""
SLACK_OF_ONE: dict[str, Any] = {**BASE, "config_values": {"timer_slack": [1]}}
"""Timers that may fire one tick late (KS-GEN-9)."""
ON_ADVANCE: dict[str, Any] = {**BASE, "config_values": {"persist_trigger": ["advance"], "persist_interval": [1, 2]}}
"""Danube's cursor writes (KS-CUR-12): on a move once the interval has passed, else at the next move."""
FLUSHED: dict[str, Any] = {
    **BASE,
    "config_values": {"persist_trigger": ["advance"], "persist_interval": [2, 3], "persist_flush": [2]},
}
"""Pulsar's cursor writes (KS-CUR-12): rate-limited on each move, and a pending one flushed every other tick."""
SHARED_NAMES: dict[str, Any] = {
    **OWNER,
    "selectors": ["pulsar-consistent"],
    "poison_policies": ["drop"],
    "config_values": {},
    "shared_names": True,
}
"""Consumers joining under a name a member already has (pulsar-consistent, KS-ASN-5)."""
GROWING = ["publish", "add_consumer", "ack", "nack", "tick"]
"""Ops of a membership that only grows: joins to a busy membership are where selector stability shows."""
