"""Issue 33: a system fault is a finding, a declared absence skips what it cannot exercise, the protocol's lists agree.

A system that fails a valid op answers `system_fault` (spec/adapter-protocol.md section 2): the kit records a
`system-fault` finding (KS-GEN-4) with its scenario and goes on, where `errored` stays an adapter fault. An
honest adapter that declares what its system lacks (`timers: false`, no source of redelivery) reaches
`conformant`; one that declares an absence and still does the thing is caught. The option lists of the schema
and of the protocol's text stay equal.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from ks_conformance.protocol import (
    CONFIG_FIELDS,
    SYSTEM_FAULT,
    AdapterFault,
    Capabilities,
    InProcessConnection,
    StartFailed,
    interpret,
)
from ks_conformance.results import RunResult, settings_for
from ks_conformance.statuses import check_needs
from ks_conformance.suite import run_suite

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
sys.path.insert(0, str(ROOT / "examples"))

from toy_adapter import IMPLEMENTATION, Toy  # noqa: E402

NO_TIMERS = "behaviour driven by ticks (the implementation declares timers: false)"
NO_REDELIVERY = "a source of redelivery: nack, ack_timeout, remove_consumer, disconnect with eviction, or restart"


class Honest(Toy):
    """The toy dispatcher without leaves, accepting `tick` as the no-op it is, declaring both absences."""

    capabilities: ClassVar[dict[str, Any]] = {
        "profiles": ["strict"],
        "selectors": ["any"],
        "ops": ["publish", "add_consumer", "ack", "tick"],
        "window": False,
        "cursor": False,
        "timers": False,
    }

    def start(self) -> dict[str, Any]:
        return {"version": 2, "implementation": IMPLEMENTATION, "capabilities": self.capabilities}

    def tick(self, op: dict[str, Any]) -> list[dict[str, Any]]:
        """Nothing in this system is driven by time."""
        return []

    def stop(self) -> None:
        pass


class TimesOutAnyway(Honest):
    """Declares timers: false, yet a tick times out every outstanding delivery (a broken promise)."""

    def tick(self, op: dict[str, Any]) -> list[dict[str, Any]]:
        events = []
        for offset, holder in self.holder.items():
            if holder is not None:
                self.holder[offset] = None
                attempt = self.attempts[offset]
                events.append(
                    {
                        "event": "timeout",
                        "offset": offset,
                        "key": self.keys[offset],
                        "consumer": holder,
                        "attempt": attempt,
                    }
                )
        return events


class CrashesOnPublish(Honest):
    """Every 5th publish crashes the queue process: the system rejects a valid publish."""

    capabilities: ClassVar[dict[str, Any]] = {
        **Honest.capabilities,
        "ops": ["publish", "add_consumer", "remove_consumer", "ack"],
    }
    publishes = 0

    def op(self, op: dict[str, Any]) -> dict[str, Any]:
        if op["op"] == "publish" and op["offset"] == len(self.keys):
            self.publishes += 1
            if self.publishes % 5 == 0:
                return {"ok": False, "error": {"code": SYSTEM_FAULT, "message": "queue process exited: assertion"}}
        return super().op(op)


def run(adapter: Honest) -> RunResult:
    settings = settings_for("ci", seed=0, max_examples=25, examples_total=0, rounds=1, coverage_rounds=0, shrinks=30)
    return run_suite(lambda: InProcessConnection(adapter, type(adapter).__name__), settings)


def statuses(result: RunResult) -> dict[str, tuple[str, str]]:
    return {r["id"]: (r["status"], r.get("reason", "")) for r in result.requirements}


# --- declarable absence ----------------------------------------------------------------------------


def test_an_honest_adapter_that_declares_its_absences_is_conformant() -> None:
    result = run(Honest())
    found = statuses(result)
    assert result.faults == [] and result.findings == []
    assert found["KS-GEN-7"][0] == "skipped" and NO_TIMERS in found["KS-GEN-7"][1]
    for requirement in ("KS-RES-2", "KS-RTY-5"):
        assert found[requirement] == ("skipped", "needs " + NO_REDELIVERY), found[requirement]
    assert not [r for r, (status, _) in found.items() if status == "vacuous"]
    assert result.verdict == "conformant"


def test_a_declared_absence_is_a_promise() -> None:
    result = run(TimesOutAnyway())
    assert result.faults == []
    assert statuses(result)["KS-RTY-2"][0] == "failed"
    assert "premature-timeout" in {a.name for f in result.findings for a in f.anomalies}


def test_timers_false_draws_no_timer_and_refuses_a_contradiction() -> None:
    plain = {"profiles": ["strict"], "selectors": ["ring"], "ops": ["publish", "nack", "tick", "disconnect"]}
    declared = Capabilities.from_json({**plain, "timers": False})
    assert declared.timers is False and declared.to_json()["timers"] is False
    for name in ("ack_timeout", "backoff_base", "evict_after", "persist_interval"):
        assert declared.config_values[name] == (0,)
    assert check_needs("phase-order", declared, {}) == NO_TIMERS
    assert check_needs("premature-eviction", declared, {}) == NO_TIMERS
    assert check_needs("duplicate", declared, {}) is None  # nack is a source of redelivery
    with pytest.raises(StartFailed, match="contradicts timers"):
        Capabilities.from_json({**plain, "timers": False, "ack_timeout": True})
    with pytest.raises(StartFailed, match="allows only"):
        Capabilities.from_json({**plain, "timers": False, "config_values": {"backoff_max": [3]}})


def test_phase_order_needs_a_source_of_two_phase_tick_effects_not_only_the_tick_op() -> None:
    tick_only = Capabilities.from_json({"profiles": ["strict"], "selectors": ["any"], "ops": ["publish", "tick"]})
    assert "two phases" in (check_needs("phase-order", tick_only, {}) or "")
    timed = Capabilities.from_json(
        {"profiles": ["strict"], "selectors": ["any"], "ops": ["publish", "tick"], "ack_timeout": True}
    )
    assert check_needs("phase-order", timed, {}) is None
    assert check_needs("duplicate", tick_only, {}) == NO_REDELIVERY


# --- system faults ---------------------------------------------------------------------------------


def test_system_fault_is_a_finding_not_an_adapter_fault() -> None:
    result = run(CrashesOnPublish())
    assert result.faults == [], result.faults
    faults = [f for f in result.findings if any(a.name == "system-fault" for a in f.anomalies)]
    assert faults and faults[0].scenario.steps, "a system fault is reported with the scenario that shows it"
    assert statuses(result)["KS-GEN-4"][0] == "failed"
    assert result.verdict == "not-conformant"


def test_interpret_reads_a_system_fault_and_refuses_one_with_events() -> None:
    request = {"cmd": "op", "seq": 3, "op": {"op": "publish", "offset": 0, "key": "k"}}
    answer = {"seq": 3, "ok": False, "error": {"code": "system_fault", "message": "queue crashed"}}
    outcome = interpret(answer, request, validate=True)
    assert (outcome.kind, outcome.code, outcome.message) == ("refused", SYSTEM_FAULT, "queue crashed")
    with pytest.raises(AdapterFault, match="no events"):
        interpret({**answer, "events": [{"event": "ack", "offset": 0, "key": "k", "consumer": "c"}]}, request, False)


# --- the protocol's lists agree with its schema --------------------------------------------------


def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SPEC / "schemas" / name).read_text(encoding="utf-8"))
    return loaded


def row(document: Path, first_cell: str) -> str:
    return next(line for line in document.read_text(encoding="utf-8").splitlines() if line.startswith(first_cell))


def test_the_config_values_row_names_every_field_the_schema_accepts() -> None:
    accepted = schema("adapter-v2.schema.json")["definitions"]["capabilities"]["properties"]["config_values"]
    names = set(accepted["propertyNames"]["enum"])
    text = set(re.findall(r"`([a-z_]+)`", row(SPEC / "adapter-protocol.md", "| `config_values` |")))
    assert names == set(CONFIG_FIELDS)
    assert names <= text, f"the protocol text does not name {sorted(names - text)}"


def test_the_error_codes_of_the_schema_are_the_ones_the_protocol_text_gives() -> None:
    response = schema("adapter-v2.schema.json")["definitions"]
    refusal = next(d for d in response.values() if "error" in d.get("properties", {}))
    codes = set(refusal["properties"]["error"]["properties"]["code"]["enum"])
    text = (SPEC / "adapter-protocol.md").read_text(encoding="utf-8")
    section = text[text.index("## 2 Op responses") : text.index("## 3 Ops")]
    assert codes == {c for c in re.findall(r"`([a-z_]+)`", section) if c in codes | {"system_fault"}}
    assert "system_fault" in codes


def test_the_dead_letter_reasons_of_the_schema_are_the_ones_trace_md_gives() -> None:
    event = schema("trace-event-v1.schema.json")["definitions"]["event_dead_letter"]
    reasons = set(event["properties"]["reason"]["enum"])
    text = row(SPEC / "trace.md", "| `dead_letter` | `nack`")
    assert reasons == {"nack", "timeout", "left"}
    assert reasons <= set(re.findall(r"`([a-z_]+)`", text))


def test_a_skipped_requirement_says_each_need_once_and_then_the_checks_notes() -> None:
    """KS-DRN-2's two checks both need held events: the reason once read "needs held events (...); note one or held
    events (...); note two"; a note is what follows a need's first "; " outside parentheses."""
    from ks_conformance.statuses import skip_reason

    held = "held events (capability held_events)"
    reason = skip_reason([f"{held}; a drain that never clears shows as stuck-key", f"{held}; a needless hold shows"])
    assert reason == f"needs {held}: a drain that never clears shows as stuck-key; a needless hold shows"
    assert skip_reason(["op disconnect", "op disconnect"]) == "needs op disconnect"
    timed = "backoff_base > 0 (the adapter supports [0]; refused [3])"
    assert skip_reason([timed, "capability ack_timeout"]) == f"needs {timed} or capability ack_timeout"
