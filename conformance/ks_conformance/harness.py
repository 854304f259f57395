"""The harness: drive one subscription through an adapter, record its trace, judge it after every op.

A `Session` turns each operation into the trace's op events (the kit writes them; the adapter reports
effects only), feeds them and the adapter's effects to the `Checker`, and adds the checks only a
harness can make (spec/checking.md section 2.4): refusals (KS-GEN-4), stats (KS-OBS-1, KS-OBS-2,
KS-BEF-2). `settle` drives the subscription to quiescence (spec section 19) and records the
`quiescent` point where liveness is judged. The steps it performed are a replayable scenario.

Long because each op's expected refusal (KS-GEN-4), its op events and the stats comparison live here together,
so that the harness's whole contract for one op reads in one file.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ks_spec.buckets import bucket_hash, bucket_index
from ks_spec.config import CONFIG_DEFAULTS

from ks_conformance import settle as settling
from ks_conformance.anomalies import Anomaly, Explanation
from ks_conformance.checker import Checker, Event
from ks_conformance.checks.records import Segment
from ks_conformance.protocol import SYSTEM_FAULT, AdapterFault, Capabilities, Connection, Outcome

FILTER_SELECTORS_REFUSED = ("pulsar-auto-split", "pulsar-sticky", "buckets", "partitions")
SLOTS = 65536
SETTLER_CAPACITY = 4
UNBOUNDED_CAPACITY = 1_000_000
"""The capacity the kit gives consumers of an adapter without flow control: more than a run can ever hold."""


@dataclass
class Step:
    """One line of a scenario: an op (with the refusal it must get, if any) or a settle directive."""

    op: dict[str, Any] | None = None
    expect: str | None = None
    settle: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The scenario line (spec/scenario-format.md)."""
        if self.settle is not None:
            return {"settle": {"order": self.settle}}
        line: dict[str, Any] = {"op": self.op}
        if self.expect is not None:
            line["expect"] = {"refusal": self.expect}
        return line

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> Step:
        """Read a scenario line."""
        if "settle" in line:
            return cls(settle=str(line["settle"].get("order", "oldest")))
        expect = line.get("expect", {}).get("refusal") if isinstance(line.get("expect"), Mapping) else None
        return cls(op=dict(line["op"]), expect=expect)


class Session:
    """One subscription under test: ops in, trace and anomalies out."""

    def __init__(
        self,
        connection: Connection,
        capabilities: Capabilities,
        config: Mapping[str, Any],
        *,
        check_stats: bool = True,
        implementation: Mapping[str, Any] | None = None,
        tolerated: Collection[str] = (),
    ) -> None:
        self.connection = connection
        self.capabilities = capabilities
        self.config = dict(config)
        self.tolerated = frozenset(tolerated)
        """Anomaly kinds that do not stop a settle (kinds a run has found already and looks past)."""
        self.check_stats = check_stats and capabilities.stats
        self.implementation = dict(implementation or {})
        self.checker = Checker()
        self.checker.explicit_ops = True  # every op is marked here: an op's own ack effects never split it
        self.trace: list[Event] = []
        self.steps: list[Step] = []
        self.anomalies: list[Anomaly] = []
        self.harness_exercised: Counter[str] = Counter()
        self.skipped_ops: dict[str, str] = {}
        self.tick = 0
        self.since_restart: Counter[str] = Counter()
        self.diverged = False
        self._reported = 0
        self._settle_mark = 0

    # --- lifecycle -------------------------------------------------------------------------------

    def begin(self) -> Outcome:
        """Reset the adapter with the configuration and write the trace's first events."""
        outcome = self.connection.reset(self.config)
        if not outcome.ok:
            return outcome
        detail: dict[str, Any] = {"trace_version": 1, "config": self.config}
        declared = self.capabilities.declared()
        if declared:
            detail["declared"] = declared
        if self.implementation:
            detail["implementation"] = self.implementation
        self._record({"event": "config", "detail": json.dumps(detail, sort_keys=True)})
        if self.config.get("selector") == "buckets":
            budget = int(self.config.get("bucket_budget", 4))
            self._record(
                {"event": "segment_created", "segment": 0, "buckets": budget, "range_lo": 0, "range_hi": 0xFFFF}
            )
        self.checker.end_op()
        return outcome

    @property
    def profile(self) -> str:
        """The profile under test."""
        return str(self.config.get("profile", "strict"))

    def new_anomalies(self) -> list[Anomaly]:
        """Anomalies found since the last call, checker's and harness's, in the order found."""
        found = self.anomalies[self._reported :]
        self._reported = len(self.anomalies)
        return found

    def _record(self, event: Event) -> None:
        if event["event"] == "tick":
            self.tick += 1
        full = {"seq": len(self.trace), "tick": self.tick, **event}
        self.trace.append(full)
        before = len(self.checker.anomalies)
        self.checker.feed(full)
        self.anomalies.extend(self.checker.anomalies[before:])
        kind = full["event"]
        if kind == "restart":
            self.since_restart.clear()
        elif kind == "deliver":
            self.since_restart["delivered"] += 1
            if full["attempt"] > 1:
                self.since_restart["redelivered"] += 1
        elif kind == "drop":
            self.since_restart[f"drop:{full['reason']}"] += 1

    def _close_op(self) -> None:
        before = len(self.checker.anomalies)
        self.checker.end_op()
        self.anomalies.extend(self.checker.anomalies[before:])

    def harness_anomaly(self, name: str, let: list[str], then: str, **details: Any) -> None:
        """Record an anomaly only the harness can see (spec/checking.md section 2.4)."""
        seq = len(self.trace) - 1
        self.anomalies.append(Anomaly(name, seq, (), Explanation(tuple(let), then), details))

    # --- the refusals the spec defines (KS-GEN-4) ------------------------------------------------

    def expected_refusal(self, op: Mapping[str, Any]) -> str | None:
        """The refusal code the spec requires for this op in the present state, or None if it must be accepted."""
        name = op["op"]
        members = self.checker.members
        if name == "publish":
            return None if op.get("offset") == len(self.checker.messages) else "invalid_argument"
        if name == "publish_delayed":
            if op.get("offset") != len(self.checker.messages):
                return "invalid_argument"
            return None if delay_form_problem(self.config) is None else "invalid_argument"
        if name == "publish_entry":
            if op.get("offset") != len(self.checker.messages):
                return "invalid_argument"
            return None if batch_problem(self.config, self.checker.segments, op) is None else "invalid_argument"
        if name == "add_consumer":
            if op["consumer"] in members:
                return "duplicate_consumer"
            if int(op.get("capacity", 0)) < 1:
                return "invalid_argument"
            selector = self.config.get("selector", "ring")
            if op.get("filters") and selector in FILTER_SELECTORS_REFUSED:
                return "invalid_argument"
            if selector == "pulsar-sticky" and not self._ranges_fit(op.get("ranges")):
                return "invalid_argument"
            if "hash_name" in op and selector != "pulsar-consistent":
                return "invalid_argument"  # req: KS-GEN-4 (only a selector that hashes consumer names takes one)
            return None
        if name in ("remove_consumer", "disconnect", "reconnect", "ack", "nack", "flow"):
            if op["consumer"] not in members:
                return "unknown_consumer"
            if name == "flow" and (self.config.get("flow_control") != "permits" or int(op.get("permits", 0)) < 1):
                return "invalid_argument"
            return None
        if name in ("zombie_ack", "zombie_nack"):
            return self._zombie_refusal(op)
        if name == "seek":
            # section 14: a published offset or the end of the log, in the strict and owner profiles without buckets
            target = op.get("offset")
            if not isinstance(target, int) or isinstance(target, bool) or not 0 <= target <= len(self.checker.messages):
                return "invalid_argument"
            reliable = self.config.get("profile", "strict") != "best-effort"
            return None if reliable and self.config.get("selector") != "buckets" else "invalid_argument"
        if name == "extend":
            return self._extend_refusal(op)
        if name in ("release", "skip"):
            state = self.checker.keys.get(str(op["key"]))
            return None if state is not None and state.blocked else "not_blocked"
        if name == "rollover":
            segments = self.checker.segments
            segment = segments.get(int(op["segment"]))
            maximum = int(self.config.get("bucket_max", 1024))
            if segment is None or segment.sealed or int(op["successor"]) in segments:
                return "invalid_argument"
            return None if 1 <= int(op["buckets"]) <= maximum else "invalid_argument"
        if name == "split":
            segments = self.checker.segments
            segment = segments.get(int(op["segment"]))
            lower, upper = int(op["lower"]), int(op["upper"])
            if segment is None or segment.sealed or lower in segments or upper in segments or lower == upper:
                return "invalid_argument"
            return None if segment.hi > segment.lo else "invalid_argument"
        if name == "merge":
            segments = self.checker.segments
            low, high = segments.get(int(op["lower"])), segments.get(int(op["upper"]))
            if low is None or high is None or low.sealed or high.sealed or int(op["successor"]) in segments:
                return "invalid_argument"
            return None if low.hi + 1 == high.lo else "invalid_argument"
        return None

    def _zombie_refusal(self, op: Mapping[str, Any]) -> str | None:
        """KS-ACK-3's domain: a delivery of `offset` with `attempt`, made to `consumer` since the last restart, that
        has ended; anything else is `invalid_argument`."""
        offset, attempt = int(op["offset"]), int(op["attempt"])
        if not 0 <= offset < len(self.checker.messages):
            return "invalid_argument"
        ended = self.checker.ended_deliveries(self.checker.messages[offset])
        return None if ended.get(attempt) == op["consumer"] else "invalid_argument"

    def _extend_refusal(self, op: Mapping[str, Any]) -> str | None:
        """KS-RTY-8's domain: a member, a published offset, ticks >= 1, and timeouts to move (`ack_timeout > 0`
        outside the best-effort profile); a consumer that is not a member is `unknown_consumer`, the rest
        `invalid_argument`."""
        if op["consumer"] not in self.checker.members:
            return "unknown_consumer"
        if int(self.config.get("ack_timeout") or 0) == 0 or self.profile == "best-effort":
            return "invalid_argument"
        if not 0 <= int(op["offset"]) < len(self.checker.messages):
            return "invalid_argument"
        ticks = op.get("ticks")
        return None if isinstance(ticks, int) and not isinstance(ticks, bool) and ticks >= 1 else "invalid_argument"

    def _ranges_fit(self, ranges: Any) -> bool:
        if not isinstance(ranges, list) or not ranges:
            return False
        taken = [r for m in self.checker.members.values() for r in m.ranges]
        for pair in ranges:
            lo, hi = int(pair[0]), int(pair[1])
            if not 0 <= lo <= hi < SLOTS:
                return False
            if any(lo <= other_hi and other_lo <= hi for other_lo, other_hi in taken):
                return False
            taken.append((lo, hi))
        return True

    # --- performing ops --------------------------------------------------------------------------

    def perform(self, op: Mapping[str, Any], expect: str | None = None, record: bool = True) -> Outcome:
        """Send one op; record it, its effects and every anomaly; `expect` is the refusal the caller intends."""
        op = dict(op)
        required = self.expected_refusal(op) if not self.diverged else expect
        if record:
            self.steps.append(Step(op=op, expect=required))
        outcome = self.connection.op(op)
        if outcome.kind == "skipped":
            self.skipped_ops.setdefault(op["op"], outcome.message or "the adapter answered skipped")
            return outcome
        if self.diverged:
            return outcome
        if outcome.kind == "refused" and outcome.code == SYSTEM_FAULT:
            self._system_fault(op, outcome, required)
            return outcome
        if required is None:
            self.harness_exercised["system-fault"] += 1
            self.harness_exercised["spurious-refusal"] += 1
            if not outcome.ok:
                # req: KS-GEN-4
                self.harness_anomaly(
                    "spurious-refusal",
                    [f"op = {_op_text(op)}, after seq {len(self.trace) - 1}"],
                    f"the adapter refused it with {outcome.code!r} ({outcome.message}), but the spec defines no "
                    "refusal for it in this state (KS-GEN-4)",
                    op=op,
                    code=outcome.code,
                )
                return outcome
            self._apply(op, outcome)
            return outcome
        self.harness_exercised["missing-refusal"] += 1
        self.harness_exercised["refusal-with-effects"] += 1
        if outcome.ok:
            self.harness_anomaly(
                "missing-refusal",
                [f"op = {_op_text(op)}, after seq {len(self.trace) - 1}"],
                f"the adapter performed it (events {outcome.events}), but the spec refuses it with {required!r} "
                "(KS-GEN-4)",
                op=op,
                expected=required,
            )
            self.diverged = True  # the adapter's state now differs from the checker's: judge nothing more
            return outcome
        if outcome.code != required:
            self.harness_anomaly(
                "missing-refusal",
                [f"op = {_op_text(op)}, after seq {len(self.trace) - 1}"],
                f"the adapter refused it with {outcome.code!r}, but the spec's refusal code is {required!r} (KS-GEN-4)",
                op=op,
                expected=required,
                code=outcome.code,
            )
        if outcome.refused_events:
            self.harness_anomaly(
                "refusal-with-effects",
                [f"op = {_op_text(op)}, refused with {outcome.code!r}"],
                f"the refusal reported events {outcome.refused_events}, but a refused operation emits none (KS-GEN-4)",
                op=op,
            )
        return outcome

    def _system_fault(self, op: dict[str, Any], outcome: Outcome, required: str | None) -> None:
        """The system failed the op (adapter protocol v2 `system_fault`): a finding; the op counts as not performed."""
        if required is None:
            self.harness_exercised["system-fault"] += 1
        spec = "a valid operation" if required is None else f"an operation the spec refuses with {required!r}"
        # req: KS-GEN-4
        self.harness_anomaly(
            "system-fault",
            [f"op = {_op_text(op)}, after seq {len(self.trace) - 1}"],
            f"the system failed it ({outcome.message or 'no message'}): {spec} must be performed or refused as "
            "the spec says, never fail (KS-GEN-4)",
            op=op,
            message=outcome.message,
        )

    def _apply(self, op: dict[str, Any], outcome: Outcome) -> None:
        """Write the op's events, then its effects, then close the op and check the stats."""
        name = op["op"]
        if name in ("ack", "nack"):
            self.checker.begin_op(name)
        else:
            for event in self._op_events(op, outcome):
                self._record(event)
        for effect in outcome.events:
            self._record(effect)
        self._close_op()
        if self.check_stats:
            self.compare_stats()

    def _op_events(self, op: dict[str, Any], outcome: Outcome) -> list[Event]:
        name = op["op"]
        if name == "publish":
            event: Event = {"event": "publish", "offset": op["offset"], "key": op["key"]}
            if outcome.placement:
                event.update({k: outcome.placement.get(k) for k in ("hash", "segment", "bucket")})
            return [event]
        if name == "publish_delayed":
            return [{"event": "publish", "offset": op["offset"], "key": op["key"], "deliver_at": op["deliver_at"]}]
        if name == "publish_entry":
            first = int(op["offset"])
            placements = outcome.placements or []
            published: list[Event] = []
            for index, key in enumerate(op["keys"]):
                event = {"event": "publish", "offset": first + index, "key": key, "entry": first}
                if index < len(placements):
                    event.update({k: placements[index].get(k) for k in ("hash", "segment", "bucket")})
                published.append(event)
            return published
        if name == "add_consumer":
            added: Event = {
                "event": "consumer_added",
                "consumer": op["consumer"],
                "capacity": op["capacity"],
                "filters": list(op.get("filters", [])),
            }
            if op.get("ranges") is not None:
                added["ranges"] = [list(r) for r in op["ranges"]]
            return [added]
        if name == "remove_consumer":
            return [{"event": "consumer_removed", "consumer": op["consumer"]}]
        if name == "disconnect":
            return [{"event": "consumer_disconnected", "consumer": op["consumer"]}]
        if name == "reconnect":
            return [{"event": "consumer_reconnected", "consumer": op["consumer"]}]
        if name == "flow":
            return [{"event": "permits_granted", "consumer": op["consumer"], "capacity": op["permits"]}]
        if name in ("zombie_ack", "zombie_nack"):
            key = self.checker.messages[int(op["offset"])].key
            return [
                {
                    "event": name,
                    "offset": op["offset"],
                    "key": key,
                    "consumer": op["consumer"],
                    "attempt": op["attempt"],
                }
            ]
        if name == "extend":
            key = self.checker.messages[int(op["offset"])].key
            # The trace's `capacity` column carries the ticks asked for (spec/trace.md).
            return [
                {
                    "event": "extend",
                    "offset": op["offset"],
                    "key": key,
                    "consumer": op["consumer"],
                    "capacity": op["ticks"],
                }
            ]
        if name in ("tick", "restart"):
            return [{"event": name}]
        if name == "seek":
            return [{"event": "seek", "offset": op["offset"]}]
        if name == "release":
            return [{"event": "key_released", "key": op["key"]}]
        if name == "skip":
            return [{"event": "key_skipped", "key": op["key"]}]
        if name in ("split", "merge") and self.config.get("layout") == "reported":
            return self._reported_layout(op, outcome)
        if name == "merge":
            lower, upper = self.checker.segments[int(op["lower"])], self.checker.segments[int(op["upper"])]
            maximum = int(self.config.get("bucket_max", 1024))
            merged = _created(
                int(op["successor"]), min(lower.buckets + upper.buckets, maximum), lower.lo, upper.hi, lower.number
            )
            merged["second_predecessor"] = upper.number
            return [
                {"event": "segment_sealed", "segment": lower.number},
                {"event": "segment_sealed", "segment": upper.number},
                merged,
            ]
        segment = self.checker.segments[int(op["segment"])]
        sealed: Event = {"event": "segment_sealed", "segment": segment.number}
        if name == "rollover":
            return [sealed, _created(int(op["successor"]), int(op["buckets"]), segment.lo, segment.hi, segment.number)]
        middle = (segment.lo + segment.hi) // 2  # the lower child's last slot (spec section 17)
        buckets = max(1, segment.buckets // 2)
        return [
            sealed,
            _created(int(op["lower"]), buckets, segment.lo, middle, segment.number),
            _created(int(op["upper"]), buckets, middle + 1, segment.hi, segment.number),
        ]

    def _reported_layout(self, op: dict[str, Any], outcome: Outcome) -> list[Event]:
        """With `layout = "reported"`: a split's or merge's op events from the segments the reply reports; the
        checker judges the layout (KS-BKT-11). A reply without them, or with other numbers, is malformed."""
        if op["op"] == "split":
            sealed, numbers = [int(op["segment"])], [int(op["lower"]), int(op["upper"])]
        else:
            sealed, numbers = [int(op["lower"]), int(op["upper"])], [int(op["successor"])]
        reported = outcome.segments or []
        fields = ("segment", "buckets", "range_lo", "range_hi")
        if [r.get("segment") for r in reported] != numbers or not all(
            isinstance(r.get(f), int) and not isinstance(r.get(f), bool) for r in reported for f in fields
        ):
            raise AdapterFault(
                "malformed",
                f"{_op_text(op)}: with layout 'reported' the reply must carry 'segments', one object with integer "
                f"{', '.join(fields)} per segment created, numbered {numbers}; got {outcome.segments!r}",
                request=op,
            )
        events: list[Event] = [{"event": "segment_sealed", "segment": number} for number in sealed]
        for segment in reported:
            created = _created(
                int(segment["segment"]),
                int(segment["buckets"]),
                int(segment["range_lo"]),
                int(segment["range_hi"]),
                sealed[0],
            )
            if len(sealed) == 2:
                created["second_predecessor"] = sealed[1]
            events.append(created)
        return events

    # --- stats (KS-OBS-1, KS-OBS-2, KS-BEF-2) ----------------------------------------------------

    def compare_stats(self) -> None:
        """Query the stats and compare what the checker's state fixes."""
        stats = self.connection.stats()
        checker = self.checker
        self.harness_exercised["stats-mismatch"] += 1
        expected: dict[str, Any] = {"now": checker.now}
        if self.profile != "best-effort":
            expected.update(
                cursor=checker.cursor(),
                persisted_cursor=checker.persisted_cursor,
                delivered_total=self.since_restart["delivered"],
                redelivered_total=self.since_restart["redelivered"],
            )
            if not self.capabilities.cursor:
                del expected["persisted_cursor"]  # a system without a cursor persists none (adapter protocol v2)
        differences = [
            f"{name} is {stats.get(name, '(absent)')!r}, expected {value!r}"
            for name, value in expected.items()
            if stats.get(name) != value
        ]
        consumers = stats.get("consumers")
        if not isinstance(consumers, Mapping):
            differences.append("consumers is absent")
        else:
            if set(consumers) != set(checker.members):
                differences.append(f"consumers lists {sorted(consumers)}, the members are {sorted(checker.members)}")
            for name, member in checker.members.items():
                gauges = consumers.get(name)
                if not isinstance(gauges, Mapping):
                    continue
                if gauges.get("unacked") != len(member.outstanding):
                    differences.append(
                        f"consumers[{name!r}].unacked is {gauges.get('unacked')!r}, "
                        f"{name} holds {len(member.outstanding)}"
                    )
                if gauges.get("connected") != member.connected:
                    differences.append(f"consumers[{name!r}].connected is {gauges.get('connected')!r}")
        if differences:
            # req: KS-OBS-1
            self.harness_anomaly(
                "stats-mismatch",
                [f"the stats after seq {len(self.trace) - 1}"],
                f"{'; '.join(differences[:4])}, but the stats agree with the events (KS-OBS-1)",
                differences=differences,
            )
        blocked = sorted(key for key, state in checker.keys.items() if state.blocked)
        if blocked and self.profile != "best-effort":
            self.harness_exercised["blocked-key-hidden"] += 1
            listed = stats.get("blocked_keys")
            stuck = stats.get("stuck_keys")
            stuck_blocked = {
                entry.get("key")
                for entry in (stuck if isinstance(stuck, list) else [])
                if isinstance(entry, Mapping) and entry.get("reason") == "blocked"
            }
            hidden = [k for k in blocked if not isinstance(listed, list) or k not in listed or k not in stuck_blocked]
            if hidden:
                # req: KS-OBS-2
                state = checker.keys[hidden[0]]
                message = checker.messages[min(state.blocked)] if state.blocked else None
                self.harness_anomaly(
                    "blocked-key-hidden",
                    [f"key {hidden[0]!r} blocked at seq {message.blocked_seq if message else '?'}"],
                    f"the stats list blocked_keys = {listed!r} and stuck_keys = {stuck!r}, but every blocked key is "
                    "listed in both, the latter with reason 'blocked' (KS-OBS-2)",
                    keys=hidden,
                )
        if self.profile == "best-effort":
            self.harness_exercised["drop-uncounted"] += 1
            counted = stats.get("dropped_total")
            drops = {k.split(":", 1)[1]: v for k, v in self.since_restart.items() if k.startswith("drop:")}
            shown = {k: v for k, v in counted.items() if v} if isinstance(counted, Mapping) else None
            if shown != drops:
                # req: KS-BEF-2
                self.harness_anomaly(
                    "drop-uncounted",
                    [f"the drop events so far count {drops}"],
                    f"the stats say dropped_total = {counted!r}, but every drop is counted by reason (KS-BEF-2)",
                )

    # --- quiescence ------------------------------------------------------------------------------

    def settle(self, order: str = "oldest", seed: int = 0, record: bool = True) -> None:
        """Drive to quiescence (spec section 19) and record the `quiescent` point where liveness is judged.

        The rule is spec/scenario-format.md section 3, written once in `ks_conformance.settle` (a batch session
        follows the same one). Settling stops before the first op at which an anomaly of a kind not in
        `tolerated` has shown since it began, and then records no `quiescent` point.
        """
        if record:
            self.steps.append(Step(settle=order))
        self._settle_mark = len(self.anomalies)
        if settling.drive(settling.LiveDriver(self), order, seed):
            self.mark_quiescent()

    def permit_grants(self, ops: set[str]) -> list[dict[str, Any]]:
        """With `flow_control = "permits"`, a `flow` from every member out of permits, as a live client sends."""
        if self.config.get("flow_control") != "permits" or "flow" not in ops:
            return []
        return [
            {"op": "flow", "consumer": member.name, "permits": SETTLER_CAPACITY}
            for member in self.checker.members.values()
            if member.permits is not None and member.permits < 1
        ]

    def _halted(self) -> bool:
        """True once the adapter diverged, or an op of the current settle showed an anomaly not tolerated."""
        if self.diverged:
            return True
        # The anomalies only grow: scan each once (a settle of a dispatcher that keeps redelivering acked
        # messages can add thousands of tolerated ones, and this is asked before every op of the settle).
        found = self.anomalies
        while self._settle_mark < len(found):
            if found[self._settle_mark].name not in self.tolerated:
                return True
            self._settle_mark += 1
        return False

    def _progress(self) -> tuple[int, int]:
        """What settling moves forward: resolved messages and the persisted cursor."""
        checker = self.checker
        return len(checker.messages) - len(checker.unresolved), checker.persisted_cursor

    def catch_all_ops(self, ops: set[str]) -> list[dict[str, Any]]:
        """The ops that give the membership a member accepting every key (none when it has one already)."""
        if "add_consumer" not in ops:
            return []
        members = self.checker.members
        capacity = SETTLER_CAPACITY if self.capabilities.capacity else UNBOUNDED_CAPACITY
        if self.config.get("selector") == "pulsar-sticky":
            covered = sum(hi - lo + 1 for m in members.values() for lo, hi in m.ranges)
            if covered >= SLOTS:
                return []
            if members and "remove_consumer" not in ops:
                return []
            planned = [{"op": "remove_consumer", "consumer": name} for name in members]
            settler = {"op": "add_consumer", "consumer": "settler", "capacity": capacity, "filters": []}
            return [*planned, {**settler, "ranges": [[0, SLOTS - 1]]}]
        if any(not m.filters for m in members.values()):
            return []
        planned = []
        if len(members) >= self.capabilities.max_consumers:
            if "remove_consumer" not in ops:
                return []
            planned.append({"op": "remove_consumer", "consumer": next(iter(members))})
        name = next(f"settler{n}" for n in range(1000) if f"settler{n}" not in members)
        return [*planned, {"op": "add_consumer", "consumer": name, "capacity": capacity, "filters": []}]

    def ordered_deliveries(self, order: str, shuffle: random.Random) -> list[tuple[str, int]]:
        """Every outstanding delivery as (holder, offset): oldest first, newest first, or shuffled."""
        deliveries = [d for m in self.checker.members.values() for d in m.outstanding.values()]
        deliveries.sort(key=lambda d: d.seq, reverse=order == "newest")
        if order == "shuffled":
            shuffle.shuffle(deliveries)
        return [(d.holder.name, d.offset) for d in deliveries]

    def next_offset(self) -> int:
        """The offset the next publish must carry (the kit assigns offsets)."""
        return len(self.checker.messages)

    def known_members(self) -> list[str]:
        """The members' names, sorted."""
        return sorted(self.checker.members)

    def flush(self) -> None:
        """Nothing to do: a live session has sent every op already (a `BatchSession` sends them here)."""

    def mark_quiescent(self) -> None:
        """Record the `quiescent` point where liveness is judged (spec section 19)."""
        self._record({"event": "quiescent"})
        self._close_op()

    def _quiet(self) -> bool:
        checker = self.checker
        if any(m.outstanding for m in checker.members.values()):
            return False
        if self.profile == "best-effort":
            return True
        if not self.capabilities.cursor:
            return not checker.unresolved
        return not checker.unresolved and checker.persisted_cursor == len(checker.messages)


def delay_form_problem(config: Mapping[str, Any]) -> str | None:
    """Why spec section 6 refuses every `publish_delayed` under this configuration (None: delays are specified)."""
    if config.get("profile") == "best-effort":
        return "delayed delivery is not specified for the best-effort profile (its delivery is at once, KS-BEF-1)"
    if config.get("selector") == "buckets":
        return "delayed delivery is not specified with selector buckets"
    return None


def batch_form_problem(config: Mapping[str, Any]) -> str | None:
    """Why spec section 17 refuses every `publish_entry` under this configuration (None: batches are specified)."""
    full = {**CONFIG_DEFAULTS, **config}
    if full["profile"] != "owner":
        return "batches need the owner profile"
    if full["park_after"] != 0:
        return "batches are not specified with parking"
    return None


def place_key(segments: Mapping[int, Segment], key: str) -> tuple[int, int] | None:
    """(segment, bucket) of a key in the current layout (KS-BKT-1), None if no active segment covers it."""
    hash32 = bucket_hash(key)
    segment = next((s for s in segments.values() if not s.sealed and s.lo <= hash32 >> 16 <= s.hi), None)
    return None if segment is None else (segment.number, bucket_index(hash32 & 0xFFFF, segment.buckets))


def batch_problem(config: Mapping[str, Any], segments: Mapping[int, Segment], op: Mapping[str, Any]) -> str | None:
    """Why spec section 17 refuses this `publish_entry` (None: it must be accepted)."""
    form = batch_form_problem(config)
    if form is not None:
        return form
    keys = op.get("keys")
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        return "keys must be a non-empty list of strings"
    if {**CONFIG_DEFAULTS, **config}["selector"] != "buckets":
        if len(set(keys)) != 1:
            return "a key-based batch has one key"  # outside buckets, one key per batch (PIP-34)
        low = bucket_hash(keys[0]) & 0xFFFF
        return None if (op.get("hash_min"), op.get("hash_max")) == (low, low) else "the range is not the key's hashB"
    places = {place_key(segments, key) for key in keys}
    if None in places:
        return "no active segment"
    if len(places) != 1:
        return "the keys lie in more than one bucket"
    lows = [bucket_hash(key) & 0xFFFF for key in keys]
    if (op.get("hash_min"), op.get("hash_max")) != (min(lows), max(lows)):
        return "the range is not the keys' effective range"
    return None


def _created(number: int, buckets: int, lo: int, hi: int, predecessor: int) -> Event:
    return {
        "event": "segment_created",
        "segment": number,
        "buckets": buckets,
        "range_lo": lo,
        "range_hi": hi,
        "predecessor": predecessor,
    }


def halts(found: Sequence[Anomaly], tolerated: Collection[str]) -> bool:
    """True when a settle must stop: it showed an anomaly of a kind the run does not look past."""
    return any(anomaly.name not in tolerated for anomaly in found)


def _op_text(op: Mapping[str, Any]) -> str:
    arguments = ", ".join(f"{k}={v!r}" for k, v in op.items() if k != "op")
    return f"{op['op']}({arguments})"
