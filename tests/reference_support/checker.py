"""An independent judge of traces for the reference's own tests, written from spec/checking.md alone.

It rebuilds the abstract state of checking.md section 1 from the events and reports the
anomalies of section 2 by name. It imports nothing from ks_reference (so it cannot agree with
the reference by construction) and nothing from ks_conformance (which is written in parallel).

Two readings it shares with checking.md:
- the trace has no op event for `ack` and `nack`, so an `ack`, `ack_ignored`, `nack` or
  `nack_ignored` event starts a new op here (its effects follow it);
- with selector `buckets`, KS-ASN-1 holds per segment: a key's messages in a sealed predecessor
  and in its successor may go to different owners within one membership epoch (KS-BKT-3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import mmh3

OPS = {
    "config", "publish", "consumer_added", "consumer_removed", "consumer_disconnected", "tick", "restart",
    "quiescent", "key_released", "key_skipped", "segment_sealed", "segment_created",
}  # fmt: skip
IMPLICIT_OPS = {"ack", "ack_ignored", "nack", "nack_ignored"}
PHASE = {
    "timeout": 1, "dead_letter": 2, "key_blocked": 2, "consumer_evicted": 4, "deliver": 5, "held": 5, "filter": 5,
    "bucket_withheld": 5, "bucket_assigned": 5, "cursor_persisted": 6, "checkpoint": 6,
}  # fmt: skip


def glob(pattern: str, key: str) -> bool:
    """The glob of spec section 5, by dynamic programming (a different algorithm from the reference's)."""
    matches = [True] + [False] * len(key)
    for char in pattern:
        if char == "*":
            for i in range(1, len(key) + 1):
                matches[i] = matches[i] or matches[i - 1]
        else:
            matches = [False] + [matches[i] and (char == "?" or char == key[i]) for i in range(len(key))]
    return matches[len(key)]


@dataclass(eq=False)
class Incarnation:
    name: str
    capacity: int
    filters: list[str]
    connected: bool = True
    disconnected_at: int = 0
    outstanding: set[int] = field(default_factory=set)

    def accepts(self, key: str) -> bool:
        return not self.filters or any(glob(p, key) for p in self.filters)


@dataclass
class Msg:
    key: str
    resolved: bool = False
    deliveries: int = 0
    failures: int = 0
    last_failure: str | None = None
    holder: Incarnation | None = None
    attempt: int = 0
    delivered_at: int = 0
    retrying: bool = False
    retry_end: int = 0
    ready: bool = False
    returned: bool = False
    blocked: bool = False
    ever_held: bool = False
    last_hold: str | None = None
    left_by_holder: bool = False
    outcomes: int = 0
    publish_op: int = 0
    hash: int | None = None
    segment: int | None = None
    bucket: int | None = None


@dataclass
class Anomaly:
    name: str
    seq: int
    detail: str


class TraceChecker:
    """Feed events with `check(events)`; read `anomalies` and `exercised`."""

    def __init__(self) -> None:
        self.anomalies: list[Anomaly] = []
        self.exercised: set[str] = set()
        self.msgs: dict[int, Msg] = {}
        self.members: dict[str, Incarnation] = {}
        self.epoch = 0
        self.epoch_change: tuple[str, str | None] = ("", None)
        self.last_delivery: dict[str, tuple[int, str, int | None]] = {}
        self.persisted_cursor = 0
        self.persisted_holes: set[int] = set()
        self.persisted_at: int | None = None
        self.restarted = False
        self.now = 0
        self.op: str | None = None
        self.op_index = 0
        self.phase = 0
        self.skipped_keys: set[str] = set()
        self.segments: dict[int, dict[str, Any]] = {}
        self.checkpoints: dict[tuple[int, int], int] = {}
        self.config: dict[str, Any] = {}
        self.bucket_holders: dict[tuple[int, int], dict[Incarnation, int]] = {}

    # --- helpers ---

    def report(self, name: str, seq: int, detail: str) -> None:
        self.anomalies.append(Anomaly(name, seq, detail))

    def cfg(self, name: str, default: Any) -> Any:
        return self.config.get(name, default)

    @property
    def profile(self) -> str:
        return str(self.cfg("profile", "strict"))

    def unresolved(self) -> list[int]:
        return sorted(o for o, m in self.msgs.items() if not m.resolved)

    def cursor(self) -> int:
        pending = self.unresolved()
        return pending[0] if pending else len(self.msgs)

    def holes(self) -> set[int]:
        cursor = self.cursor()
        return {o for o, m in self.msgs.items() if m.resolved and o > cursor}

    def earlier(self, offset: int) -> list[Msg]:
        key = self.msgs[offset].key
        return [m for o, m in self.msgs.items() if o < offset and m.key == key and not m.resolved]

    # --- driving ---

    def check(self, events: list[dict[str, Any]]) -> list[Anomaly]:
        for event in events:
            self.feed(event)
        self.end_op(events[-1]["seq"] if events else 0)
        return self.anomalies

    def feed(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        seq = event["seq"]
        if kind in OPS or kind in IMPLICIT_OPS:
            self.end_op(seq)
            self.op = kind
            self.op_index += 1
            self.phase = 0
            self.skipped_keys = set()
        if self.op == "tick" and (kind in PHASE or kind == "drop"):
            phase = 2 if kind == "drop" and event.get("reason") == "poison" else PHASE.get(kind, 5)
            if self.phase == 0 or phase >= self.phase:
                if phase >= 3 > self.phase:
                    self.phase_3_point()
                self.phase = max(self.phase, phase)
            else:
                self.report("phase-order", seq, f"{kind} (phase {phase}) after phase {self.phase}")
        handler = getattr(self, f"on_{kind}", None)
        if handler is not None:
            handler(event)

    def phase_3_point(self) -> None:
        for m in self.msgs.values():
            if m.retrying and not m.ready and m.retry_end <= self.now and not m.resolved:
                m.ready = True

    def end_op(self, seq: int) -> None:
        op = self.op
        if op is None:
            return
        reliable = self.profile != "best-effort"
        if op == "tick" and reliable:
            if self.phase < 3:
                self.phase_3_point()
            timeout = self.cfg("ack_timeout", 0)
            for o, m in self.msgs.items():
                if timeout and m.holder is not None and m.delivered_at + timeout <= self.now:
                    self.report("missed-timeout", seq, f"offset {o}")
                if not m.resolved and not m.blocked and m.failures > self.cfg("max_redeliveries", 5):
                    self.report("poison-ignored", seq, f"offset {o}")
            evict = self.cfg("evict_after", 6)
            for name, inc in self.members.items():
                if evict and not inc.connected and inc.disconnected_at + evict <= self.now:
                    self.report("missed-eviction", seq, name)
        if reliable and op not in ("config", "quiescent"):
            interval = self.cfg("persist_interval", 0)
            due = interval == 0 or (
                op == "tick" and (self.persisted_at is None or self.now - self.persisted_at >= interval)
            )
            differs = self.cursor() != self.persisted_cursor or (
                self.cfg("persist_ack_holes", False) and self.holes() != self.persisted_holes
            )
            if due and differs:
                self.report("persist-late", seq, f"cursor {self.cursor()} persisted {self.persisted_cursor}")
            if self.cfg("selector", "ring") not in ("pulsar-sticky", "buckets"):
                self.idle_while_ready(seq)
        if not reliable and op == "publish":
            last = max(self.msgs)
            if self.msgs[last].outcomes == 0:
                self.report("missing-outcome", seq, f"offset {last}")
        self.op = None

    def idle_while_ready(self, seq: int) -> None:
        window = self.cfg("window", 10000)
        busy_keys = {
            m.key
            for m in self.msgs.values()
            if not m.resolved and (m.holder or m.blocked or (m.retrying and not m.ready))
        }
        seen: set[str] = set()
        for offset in self.unresolved()[:window]:
            m = self.msgs[offset]
            if m.key in seen:
                continue
            seen.add(m.key)
            if m.key in busy_keys or m.holder is not None:
                continue
            eligible = [inc for inc in self.members.values() if inc.accepts(m.key)]
            if eligible and all(inc.connected and len(inc.outstanding) < inc.capacity for inc in eligible):
                self.report("idle-while-ready", seq, f"offset {offset} key {m.key}")

    # --- op events ---

    def on_config(self, event: dict[str, Any]) -> None:
        self.config = json.loads(event["detail"])["config"]

    def on_publish(self, event: dict[str, Any]) -> None:
        m = Msg(event["key"], publish_op=self.op_index)
        if self.cfg("selector", "ring") == "buckets":
            m.hash, m.segment, m.bucket = event.get("hash"), event.get("segment"), event.get("bucket")
            expected = mmh3.hash(event["key"].encode("utf-8"), 0, signed=False)
            active = [s for n, s in self.segments.items() if not s["sealed"] and s["lo"] <= expected >> 16 <= s["hi"]]
            ok = m.hash == expected and len(active) == 1 and active[0]["number"] == m.segment
            ok = ok and m.bucket == (expected & 0xFFFF) * active[0]["buckets"] // 65536
            if not ok:
                self.report("misrouted-bucket", event["seq"], f"offset {event['offset']}")
        self.msgs[event["offset"]] = m

    def on_consumer_added(self, event: dict[str, Any]) -> None:
        self.members[event["consumer"]] = Incarnation(event["consumer"], event["capacity"], event["filters"])
        self.epoch += 1
        self.epoch_change = ("join", event["consumer"])

    def _leave(self, name: str, how: str) -> None:
        inc = self.members.pop(name)
        for o in sorted(inc.outstanding):
            m = self.msgs[o]
            self._end_delivery(m)
            m.returned = True
            m.left_by_holder = True
        self.epoch += 1
        self.epoch_change = ("leave", name)

    def on_consumer_removed(self, event: dict[str, Any]) -> None:
        self._leave(event["consumer"], "removed")

    def on_consumer_evicted(self, event: dict[str, Any]) -> None:
        self.exercised.add("premature-eviction")
        inc = self.members.get(event["consumer"])
        evict = self.cfg("evict_after", 6)
        if inc is None or inc.connected or not evict or self.now < inc.disconnected_at + evict:
            self.report("premature-eviction", event["seq"], event["consumer"])
        if inc is not None:
            self._leave(event["consumer"], "evicted")

    def on_consumer_disconnected(self, event: dict[str, Any]) -> None:
        inc = self.members[event["consumer"]]
        if inc.connected:
            inc.connected = False
            inc.disconnected_at = self.now

    def on_tick(self, event: dict[str, Any]) -> None:
        self.now = event["tick"]

    def on_restart(self, event: dict[str, Any]) -> None:
        for inc in self.members.values():
            inc.outstanding.clear()
        self.members.clear()
        self.epoch += 1
        self.epoch_change = ("restart", None)
        self.restarted = True
        self.bucket_holders.clear()
        for o, m in self.msgs.items():
            m.holder = None
            if self.profile == "best-effort":
                continue  # no cursor and no redelivery: each message's outcome is final (KS-BEF-1)
            m.deliveries = m.failures = 0
            m.retrying = m.ready = m.returned = m.blocked = m.left_by_holder = False
            m.resolved = o < self.persisted_cursor or o in self.persisted_holes

    def on_key_skipped(self, event: dict[str, Any]) -> None:
        self.skipped_keys.add(event["key"])
        self.exercised.add("skip-ignored")

    def on_key_released(self, event: dict[str, Any]) -> None:
        for m in self.msgs.values():
            if m.key == event["key"] and m.blocked:
                m.blocked = False
                m.failures = 0
                m.retrying = False
                m.returned = True

    def on_segment_created(self, event: dict[str, Any]) -> None:
        self.segments[event["segment"]] = {
            "number": event["segment"], "lo": event["range_lo"], "hi": event["range_hi"],
            "buckets": event["buckets"], "predecessor": event.get("predecessor"), "sealed": False,
        }  # fmt: skip

    def on_segment_sealed(self, event: dict[str, Any]) -> None:
        self.segments[event["segment"]]["sealed"] = True

    def on_quiescent(self, event: dict[str, Any]) -> None:
        if self.profile == "best-effort":
            return
        seq = event["seq"]
        for o, m in self.msgs.items():
            if m.resolved:
                continue
            if m.left_by_holder and m.holder is None:
                self.report("lost", seq, f"offset {o}")
            elif m.last_hold == "draining":
                self.report("drain-stuck", seq, f"offset {o}")
            else:
                self.report("stuck-key", seq, f"offset {o} key {m.key}")
        if all(m.resolved for m in self.msgs.values()) and self.persisted_cursor != len(self.msgs):
            self.report("cursor-stall", seq, f"persisted {self.persisted_cursor} of {len(self.msgs)}")

    # --- effect events ---

    def _end_delivery(self, m: Msg) -> None:
        if m.holder is not None:
            m.holder.outstanding.discard(next(o for o, x in self.msgs.items() if x is m))
            if m.segment is not None and m.bucket is not None:
                holders = self.bucket_holders.get((m.segment, m.bucket), {})
                holders[m.holder] = holders.get(m.holder, 1) - 1
                if holders[m.holder] <= 0:
                    del holders[m.holder]
        m.holder = None

    def on_deliver(self, event: dict[str, Any]) -> None:
        seq, offset, name = event["seq"], event["offset"], event["consumer"]
        m = self.msgs[offset]
        inc = self.members.get(name)
        reliable = self.profile != "best-effort"
        earlier = self.earlier(offset)
        if m.resolved or m.holder is not None:
            self.report("duplicate", seq, f"offset {offset}")
        if m.deliveries == 0 and any(e.deliveries == 0 for e in earlier):
            self.report("key-reorder", seq, f"offset {offset}")
            if any(e.ever_held and e.deliveries == 0 for e in earlier):
                self.report("overtaken-hold", seq, f"offset {offset}")
        if self.profile == "strict" and earlier:
            self.report("strict-overlap", seq, f"offset {offset}")
        if reliable and any(e.retrying or e.returned for e in earlier):
            self.report("retry-overtaken", seq, f"offset {offset}")
        if reliable:
            others = [x for x in self.msgs.values() if x.key == m.key and x.holder is not None and x.holder is not inc]
            if others:
                self.report("split-owner", seq, f"offset {offset}")
            if any(x.key == m.key and x.blocked for x in self.msgs.values()):
                self.report("blocked-key-leak", seq, f"offset {offset}")
            if self.restarted and (offset < self.persisted_cursor or offset in self.persisted_holes):
                self.report("resurrected", seq, f"offset {offset}")
            window = self.cfg("window", 10000)
            if m.deliveries == 0 and sum(1 for o in self.unresolved() if o < offset) >= window:
                self.report("window-overrun", seq, f"offset {offset}")
            if m.retrying and not m.ready:
                self.report("early-retry", seq, f"offset {offset}")
            if m.failures > self.cfg("max_redeliveries", 5):
                self.report("retry-overrun", seq, f"offset {offset}")
            if event["attempt"] != m.deliveries + 1:
                self.report("attempt-miscount", seq, f"offset {offset}: attempt {event['attempt']}")
        if inc is None or not inc.connected:
            self.report("inactive-delivery", seq, f"offset {offset} to {name}")
            return
        if not inc.accepts(m.key):
            self.report("filter-violation", seq, f"offset {offset} to {name}")
        if len(inc.outstanding) + 1 > inc.capacity:
            self.report("capacity-overrun", seq, f"{name} over {inc.capacity}")
        previous = self.last_delivery.get(m.key)
        if previous is not None and previous[1] != name:
            if previous[0] == self.epoch:
                if previous[2] == m.segment:  # KS-ASN-1 holds per segment under `buckets`
                    self.report("key-moved", seq, f"key {m.key}: {previous[1]} then {name}")
            elif previous[0] == self.epoch - 1 and self.cfg("selector", "ring") != "buckets":
                change = self.epoch_change
                if change not in (("join", name), ("leave", previous[1])):
                    self.report("unstable-assignment", seq, f"key {m.key}: {previous[1]} then {name} after {change}")
        self.last_delivery[m.key] = (self.epoch, name, m.segment)
        buckets = self.cfg("selector", "ring") == "buckets"
        if buckets and reliable and m.segment is not None and m.bucket is not None:  # KS-BKT-*: strict, owner
            self._check_bucket_delivery(seq, offset, m, inc)
        m.outcomes += 1
        if not reliable and (m.outcomes > 1 or m.publish_op != self.op_index):
            self.report("best-effort-redelivery", seq, f"offset {offset}")
        m.deliveries += 1
        m.attempt = event["attempt"]
        m.holder = inc
        m.delivered_at = self.now
        m.retrying = m.ready = m.returned = False
        inc.outstanding.add(offset)

    def _check_bucket_delivery(self, seq: int, offset: int, m: Msg, inc: Incarnation) -> None:
        assert m.segment is not None and m.bucket is not None
        names = sorted(self.members)
        n = self.segments[m.segment]["buckets"]
        j = names.index(inc.name)
        if not j * n // len(names) <= m.bucket < (j + 1) * n // len(names):
            self.report("bucket-misassigned", seq, f"offset {offset} bucket {m.bucket} to {inc.name}")
        holders = self.bucket_holders.setdefault((m.segment, m.bucket), {})
        if any(h is not inc for h in holders):
            self.report("bucket-split-owner", seq, f"offset {offset}")
        holders[inc] = holders.get(inc, 0) + 1
        segment = self.segments[m.segment]
        ancestor = segment["predecessor"]
        while ancestor is not None:
            for other in self.msgs.values():
                if (
                    other.segment == ancestor
                    and not other.resolved
                    and other.hash is not None
                    and segment["lo"] <= other.hash >> 16 <= segment["hi"]
                ):
                    self.report("successor-first", seq, f"offset {offset}")
                    return
            ancestor = self.segments[ancestor]["predecessor"]

    def on_held(self, event: dict[str, Any]) -> None:
        m = self.msgs[event["offset"]]
        m.ever_held = True
        m.last_hold = event["reason"]

    def _resolve(self, event: dict[str, Any]) -> Msg:
        m = self.msgs[event["offset"]]
        if m.resolved:
            self.report("double-resolution", event["seq"], f"offset {event['offset']}")
        self._end_delivery(m)
        m.resolved = True
        m.retrying = m.ready = m.returned = m.blocked = False
        m.last_hold = None
        return m

    def on_ack(self, event: dict[str, Any]) -> None:
        m = self.msgs[event["offset"]]
        inc = self.members.get(event["consumer"])
        if m.holder is None or m.holder is not inc:
            self.report("stale-ack-accepted", event["seq"], f"offset {event['offset']}")
        if self.profile == "best-effort":
            if m.holder is not None:
                m.holder.outstanding.discard(event["offset"])
            m.holder = None
            return
        self._resolve(event)

    def on_ack_ignored(self, event: dict[str, Any]) -> None:
        m = self.msgs.get(event["offset"])
        if m is not None and m.holder is not None and m.holder is self.members.get(event["consumer"]):
            if self.profile != "best-effort":
                self.report("holder-ack-ignored", event["seq"], f"offset {event['offset']}")

    def on_nack(self, event: dict[str, Any]) -> None:
        m = self.msgs[event["offset"]]
        if m.holder is None or m.holder is not self.members.get(event["consumer"]):
            self.report("stale-nack-accepted", event["seq"], f"offset {event['offset']}")
        self._fail(m, "nack")

    def on_nack_ignored(self, event: dict[str, Any]) -> None:
        m = self.msgs.get(event["offset"])
        if m is not None and m.holder is not None and m.holder is self.members.get(event["consumer"]):
            if self.profile != "best-effort":
                self.report("holder-nack-ignored", event["seq"], f"offset {event['offset']}")

    def _fail(self, m: Msg, how: str) -> None:
        self._end_delivery(m)
        m.failures += 1
        m.last_failure = how
        base, cap = self.cfg("backoff_base", 1), self.cfg("backoff_max", 60)
        m.retry_end = self.now + min(base * 2 ** (m.failures - 1), cap)
        m.retrying, m.ready = True, False

    def on_timeout(self, event: dict[str, Any]) -> None:
        m = self.msgs[event["offset"]]
        timeout = self.cfg("ack_timeout", 0)
        if m.holder is None or not timeout or self.now < m.delivered_at + timeout:
            self.report("premature-timeout", event["seq"], f"offset {event['offset']}")
        self._fail(m, "timeout")

    def on_drop(self, event: dict[str, Any]) -> None:
        m = self.msgs[event["offset"]]
        reason = event["reason"]
        seq = event["seq"]
        best_effort = self.profile == "best-effort"
        if reason == "poison" and (
            best_effort or self.cfg("poison_policy", "block") != "drop" or m.failures <= self.cfg("max_redeliveries", 5)
        ):
            self.report("unjustified-resolution", seq, f"poison drop of offset {event['offset']}")
        if reason == "operator" and m.key not in self.skipped_keys:
            self.report("unjustified-resolution", seq, f"operator drop of offset {event['offset']} without a skip")
        if reason in ("saturated", "inactive", "no-consumer") and not best_effort:
            self.report("unjustified-resolution", seq, f"best-effort drop outside best-effort: {event['offset']}")
        if m.holder is not None:
            self.report("unjustified-resolution", seq, f"drop of outstanding offset {event['offset']}")
        m.outcomes += 1
        if best_effort and (m.outcomes > 1 or m.publish_op != self.op_index):
            self.report("best-effort-redelivery", seq, f"offset {event['offset']}")
        self._resolve(event)

    def on_dead_letter(self, event: dict[str, Any]) -> None:
        m = self.msgs[event["offset"]]
        seq = event["seq"]
        if self.cfg("poison_policy", "block") != "dead-letter" or m.failures <= self.cfg("max_redeliveries", 5):
            self.report("unjustified-resolution", seq, f"dead letter of offset {event['offset']}")
        if event["attempt"] != m.deliveries or event["reason"] != m.last_failure:
            self.report("dead-letter-mismatch", seq, f"offset {event['offset']}")
        self._resolve(event)

    def on_filter(self, event: dict[str, Any]) -> None:
        m = self.msgs[event["offset"]]
        if not self.members:
            self.report("filtered-without-members", event["seq"], f"offset {event['offset']}")
        elif any(inc.accepts(m.key) for inc in self.members.values()):
            self.report("unjustified-filter", event["seq"], f"offset {event['offset']}")
        m.outcomes += 1
        self._resolve(event)

    def on_key_blocked(self, event: dict[str, Any]) -> None:
        m = self.msgs[event["offset"]]
        m.blocked = True
        m.retrying = m.ready = False

    def on_cursor_persisted(self, event: dict[str, Any]) -> None:
        seq, cursor = event["seq"], event["cursor"]
        holes = {o for lo, hi in event.get("ranges") or [] for o in range(lo, hi + 1)}
        unresolved = [o for o in self.unresolved() if o < cursor or o in holes]
        if unresolved:
            self.report("cursor-skip", seq, f"cursor {cursor} passes unresolved {unresolved[:3]}")
        if cursor < self.persisted_cursor:
            self.report("cursor-regress", seq, f"{cursor} after {self.persisted_cursor}")
        interval = self.cfg("persist_interval", 0)
        if interval and (
            self.op != "tick" or (self.persisted_at is not None and self.now - self.persisted_at < interval)
        ):
            self.report("persist-early", seq, f"cursor {cursor}")
        self.persisted_cursor, self.persisted_holes, self.persisted_at = cursor, holes, self.now

    def on_checkpoint(self, event: dict[str, Any]) -> None:
        bucket = (event["segment"], event["bucket"])
        position = event["cursor"]
        if position < self.checkpoints.get(bucket, 0):
            self.report("checkpoint-skip", event["seq"], f"{bucket} moved back to {position}")
        for o, m in self.msgs.items():
            if o < position and not m.resolved and (m.segment, m.bucket) == bucket:
                self.report("checkpoint-skip", event["seq"], f"{bucket} at {position} passes unresolved {o}")
                break
        self.checkpoints[bucket] = position


def anomalies_of(events: list[dict[str, Any]]) -> list[Anomaly]:
    """Every anomaly the checker finds in a whole trace."""
    return TraceChecker().check(events)


def conformance_anomalies(events: list[dict[str, Any]]) -> list[str] | None:
    """The conformance kit's checker's anomalies for the same trace (None when ks_conformance is absent).

    A `key-moved` between messages of two different segments is left out, as in `TraceChecker`.
    A best-effort trace with a restart is not judged (None) either: the kit's checker marks every
    message unresolved again after it, as if best-effort had a cursor at 0.
    A trace where one key had several blocked messages at once is not judged (None): the kit's
    checker keeps one blocked message per key, the reference blocks each poisoned message and a
    release or skip covers them all (see notes/reference-vs-checker.md).
    """
    try:
        from ks_conformance.checker import check_events
    except ImportError:
        return None
    config = json.loads(events[0]["detail"])["config"]
    if config.get("profile") == "best-effort" and any(e["event"] == "restart" for e in events):
        return None  # the kit's checker re-opens every message at a best-effort restart (notes, item 3)
    blocked: dict[str, int] = {}
    for event in events:
        if event["event"] == "key_blocked":
            blocked[event["key"]] = blocked.get(event["key"], 0) + 1
            if blocked[event["key"]] > 1:
                return None
        elif event["event"] in ("key_released", "key_skipped"):
            blocked.pop(event["key"], None)
        elif event["event"] == "restart":
            blocked.clear()
    by_seq = {event["seq"]: event for event in events}
    segment_of = {e["offset"]: e.get("segment") for e in events if e["event"] == "publish"}
    found = []
    for anomaly in check_events(events).anomalies:
        if anomaly.name == "key-moved":
            witnesses = [by_seq[s] for s in anomaly.witness if by_seq[s]["event"] == "deliver"]
            if len({segment_of[w["offset"]] for w in witnesses}) > 1:
                continue
        found.append(f"{anomaly.name}@{anomaly.seq}")
    return found
