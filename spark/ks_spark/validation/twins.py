"""Fault-injected twins of correct traces, for `keyshared verify` and demonstrations.

A twin is the same trace with a few faults a real dispatcher could make, each of which the
validator must report: a message delivered twice, a persisted cursor that runs past an unresolved
message, and an ack that is never sent (the message is still unresolved at the quiescent point).
"""

from __future__ import annotations

import copy
from typing import Any

Event = dict[str, Any]

TWIN_ANOMALIES = ("duplicate", "cursor-skip", "stuck-key")
"""What a twin must be found guilty of."""


def renumber(events: list[Event]) -> list[Event]:
    """Dense seqs from 0; each event's tick is the number of tick events up to it (trace format rules)."""
    tick = 0
    fixed = []
    for seq, event in enumerate(events):
        event = dict(event)
        if event["event"] == "tick":
            tick += 1
        event["seq"] = seq
        event["tick"] = tick
        fixed.append(event)
    return fixed


def fault_twin(events: list[Event]) -> list[Event]:
    """The trace with a duplicate delivery and a lost ack (see TWIN_ANOMALIES).

    The lost ack leaves its message unresolved: the later persisted cursors pass it (cursor-skip) and
    the quiescent point finds it (stuck-key). Needs a trace with deliveries, acks, persisted cursors
    after the ack and a quiescent point; raises ValueError otherwise.
    """
    twin = copy.deepcopy(events)
    delivers = [i for i, e in enumerate(twin) if e["event"] == "deliver"]
    acks = [i for i, e in enumerate(twin) if e["event"] == "ack"]
    if not delivers or not acks or not any(e["event"] == "quiescent" for e in twin):
        raise ValueError("a twin needs deliveries, acks and a quiescent point")
    lost_ack = acks[len(acks) // 2]
    offset = twin[lost_ack]["offset"]
    if not any(e["event"] == "cursor_persisted" and e["cursor"] > offset for e in twin[lost_ack:]):
        raise ValueError("a twin needs a persisted cursor beyond the lost ack")
    del twin[lost_ack]
    duplicated = delivers[len(delivers) // 3]
    twin.insert(duplicated + 1, dict(twin[duplicated]))
    return renumber(twin)
