"""Trace validation: check an implementation's trace (spec/trace.md) against KeySharedOrdering with TLC.

The trace becomes a TLA+ sequence constant in a generated module that extends
KeySharedOrderingTrace; TLC replays it one action per event and prints whether it reached the end
or the first event that does not fit, with the requirements that event breaks. Keys and
consumer names are renamed to `k0`, `c0`, ... so that any Unicode string survives the trip.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ks_spec.errors import UserError
from ks_spec.trace import Event, config_of, load_trace

from ks_models import MODELS_DIR
from ks_models.tlc import TlcOutcome, TlcRun, run_tlc
from ks_models.values import ModelValue, TlaSeq, TlaSet, parse_value

TRACE_SPEC = "KeySharedOrderingTrace.tla"
MODEL_SPEC = "KeySharedOrdering.tla"

# Events the model replays as no-ops, and why (also listed in models/README.md).
SKIPPED_EVENTS = {
    "tick": "the model is untimed: timeouts, back-off and eviction delays are nondeterministic",
    "zombie_ack": "a late result for an ended delivery changes nothing the model keeps (KS-ACK-3)",
    "zombie_nack": "a late result for an ended delivery changes nothing the model keeps (KS-ACK-3)",
    "quiescent": "liveness is judged by the checkers (spec/checking.md 2.3), not by replaying one run",
    "checkpoint": "per-bucket checkpoints are not in KeySharedOrdering (BucketHandoff and CursorSafety model them)",
    "bucket_withheld": "bucket handoff is modelled by BucketHandoff; per-key draining still applies",
    "bucket_assigned": "bucket handoff is modelled by BucketHandoff; per-key draining still applies",
    "segment_sealed": "segments are modelled by BucketHandoff",
}
# Events the model replays with a check but no state change.
CHECKED_ONLY_EVENTS = ("held", "ack_ignored", "nack_ignored", "key_skipped")
NO_OFFSET = -1


@dataclass
class TraceVerdict:
    """The result of validating one trace."""

    path: Path
    events: int
    accepted: bool | None  # None: TLC could not decide (an error)
    first_unfit: Event | None = None
    reasons: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    outcome: TlcOutcome | None = None
    problem: str | None = None

    @property
    def summary(self) -> str:
        """One line: accepted, or rejected at which event and why."""
        if self.accepted:
            return f"accepted: all {self.events} events replayed by KeySharedOrdering"
        if self.accepted is None:
            return f"not decided: {self.problem}"
        return f"rejected at {describe_event(self.first_unfit)}" + (
            f" (breaks {', '.join(self.reasons)})" if self.reasons else ""
        )


def describe_event(event: Event | None) -> str:
    """'seq 12 (deliver offset 2, key "k", consumer "c2", attempt 1)'."""
    if event is None:
        return "an unknown event"
    parts = [
        f"{column} {event[column]!r}" if isinstance(event[column], str) else f"{column} {event[column]}"
        for column in ("offset", "key", "consumer", "attempt", "reason", "cursor")
        if event.get(column) is not None
    ]
    return f"seq {event['seq']} ({event['event']}" + (" " + ", ".join(parts) if parts else "") + ")"


def glob_matches(pattern: str, key: str) -> bool:
    """Filter matching of KS-FLT-1: `*` any run, `?` one character, everything else literal."""
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, key, flags=re.DOTALL) is not None


def _tla_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tla_set(items: list[str] | list[int]) -> str:
    return "{" + ", ".join(str(i) if isinstance(i, int) else _tla_string(i) for i in items) + "}"


@dataclass
class TraceModule:
    """The generated TLA+ module and .cfg for one trace, and the names it renamed."""

    module: str
    config: str
    key_ids: dict[str, str]
    consumer_ids: dict[str, str]
    skipped: Counter[str]


def build_trace_module(events: list[Event], where: str, module_name: str = "KSTrace") -> TraceModule:
    """Write the trace as TLA+ records [seq, e, o, k, c, a, cap, acc, r, cur, holes, p]."""
    config = config_of(events)
    profile = config.get("profile", "strict")
    if profile not in ("strict", "owner"):
        raise UserError(
            f"{where}:1: field 'detail': profile {profile!r} is not modelled by KeySharedOrdering "
            "(only strict and owner are)"
        )
    key_ids: dict[str, str] = {}
    consumer_ids: dict[str, str] = {}
    for event in events:
        if event.get("key") is not None:
            key_ids.setdefault(event["key"], f"k{len(key_ids)}")
        if event.get("consumer") is not None:
            consumer_ids.setdefault(event["consumer"], f"c{len(consumer_ids)}")
    key_of_offset = {e["offset"]: e["key"] for e in events if e["event"] == "publish"}
    skipped: Counter[str] = Counter()
    records: list[str] = []
    for event in events[1:]:
        kind = event["event"]
        if kind in SKIPPED_EVENTS or (kind == "segment_created" and event.get("predecessor") is None):
            skipped[kind] += 1
        offset = event.get("offset")
        key = event.get("key")
        if key is None and offset is not None:
            key = key_of_offset.get(offset)
        consumer = event.get("consumer")
        accepted: list[str] = []
        if kind == "consumer_added":
            filters = event.get("filters") or []
            accepted = [
                ident for name, ident in key_ids.items() if not filters or any(glob_matches(f, name) for f in filters)
            ]
        holes: list[int] = []
        if kind == "cursor_persisted":
            for low, high in event.get("ranges") or []:
                holes.extend(range(low, high + 1))
        fields = [
            f"seq |-> {event['seq']}",
            f"e |-> {_tla_string(kind)}",
            f"o |-> {offset if offset is not None else NO_OFFSET}",
            f"k |-> {_tla_string(key_ids[key]) if key is not None else 'NoKey'}",
            f"c |-> {_tla_string(consumer_ids[consumer]) if consumer is not None else 'NoOne'}",
            f"a |-> {event.get('attempt') or 0}",
            f"cap |-> {event.get('capacity') or 0}",
            f"acc |-> {_tla_set(accepted)}",
            f"r |-> {_tla_string(event.get('reason') or '')}",
            f"cur |-> {event['cursor'] if event.get('cursor') is not None else NO_OFFSET}",
            f"holes |-> {_tla_set(sorted(set(holes)))}",
            f"p |-> {event['predecessor'] if event.get('predecessor') is not None else NO_OFFSET}",
        ]
        records.append("[" + ", ".join(fields) + "]")
    published = sum(1 for e in events if e["event"] == "publish")
    module = "\n".join(
        [
            f"---- MODULE {module_name} ----",
            "EXTENDS KeySharedOrderingTrace, Integers",
            f"TraceKeys == {_tla_set(list(key_ids.values()))}",
            f"TraceConsumers == {_tla_set(list(consumer_ids.values()))}",
            "NoFilterChoices == {}",
            "TraceSlots == [k \\in TraceKeys |-> k]",
            "TraceEvents == <<",
            ",\n".join(records),
            ">>",
            "====",
            "",
        ]
    )
    cfg = "\n".join(
        [
            "INIT TraceInit",
            "NEXT TraceNext",
            "CONSTANTS",
            "    Trace <- TraceEvents",
            "    Consumers <- TraceConsumers",
            "    Keys <- TraceKeys",
            "    FilterChoices <- NoFilterChoices",
            f"    MaxMsgs = {published}",
            f"    Profile = {_tla_string(profile)}",
            f"    Window = {int(config.get('window', 10000))}",
            f"    MaxRedeliveries = {int(config.get('max_redeliveries', 5))}",
            f"    PoisonPolicy = {_tla_string(str(config.get('poison_policy', 'block')))}",
            f"    PersistHoles = {'TRUE' if config.get('persist_ack_holes', False) else 'FALSE'}",
            '    DrainGranularity = "key"',
            "    SlotOf <- TraceSlots",
            "    NoOne = NoOne",
            "    NoKey = NoKey",
            "    Capacity = 1",
            "    MaxFailures = 0",
            "    MaxMemberChanges = 0",
            "    MaxRestarts = 0",
            "    KeepConnected = FALSE",
            '    Bug = "none"',
            "",
        ]
    )
    return TraceModule(module, cfg, key_ids, consumer_ids, skipped)


def _verdict_lines(outcome: TlcOutcome) -> list[Any]:
    found = []
    for line in outcome.prints:
        if line.startswith('<<"accepted"') or line.startswith('<<"rejected"'):
            found.append(parse_value(line))
    return found


def validate_trace(path: Path, java: Path, jar: Path, timeout: float = 600.0) -> TraceVerdict:
    """Replay one trace file (JSON lines or Parquet) in KeySharedOrdering with TLC."""
    events = load_trace(path)
    # A module name of its own per run: concurrent TLC processes never see one another's trace module.
    name = f"KSTrace_{uuid.uuid4().hex[:12]}"
    generated = build_trace_module(events, str(path), module_name=name)
    by_seq = {event["seq"]: event for event in events}
    workdir = Path(tempfile.mkdtemp(prefix="keyshared-trace-"))
    try:
        for module in (MODEL_SPEC, TRACE_SPEC):
            shutil.copy2(MODELS_DIR / module, workdir / module)
        spec = workdir / f"{name}.tla"
        config = workdir / f"{name}.cfg"
        spec.write_text(generated.module, encoding="utf-8")
        config.write_text(generated.config, encoding="utf-8")
        run = TlcRun(spec, config, workers=1, check_deadlock=False, timeout=timeout, short=True)
        outcome = run_tlc(run, java, jar)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    verdict = TraceVerdict(path=path, events=len(events), accepted=None, skipped=generated.skipped, outcome=outcome)
    lines = _verdict_lines(outcome)
    if outcome.result != "success" or not lines:
        verdict.problem = "; ".join(outcome.errors[:2]) or f"TLC ended with {outcome.result} and no verdict"
        return verdict
    first = lines[0]
    if isinstance(first, TlaSeq) and first[0] == "accepted":
        verdict.accepted = True
        return verdict
    seq = first[1]
    verdict.accepted = False
    verdict.first_unfit = by_seq.get(seq)
    reasons = first[2] if len(first) > 2 and isinstance(first[2], TlaSet) else TlaSet()
    verdict.reasons = sorted(str(r) for r in reasons if not isinstance(r, ModelValue))
    return verdict
