"""Adapter protocol v2: capabilities that describe real systems, judged honestly.

No key affinity (selector `any`), no cursor, implementation-defined terminal outcomes, declared value sets
per configuration field, refusals of undeclared values, and adapters without `held` events: each correct
variant of the reference must come out conformant with the requirements it cannot show skipped (and the
reason), and a v1 adapter must still be driven. The broken variants are mutants in tests/conformance_mutants.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conformance_mutants import WITHOUT_ZOMBIES, bugs
from ks_conformance.builder import TraceBuilder
from ks_conformance.checker import Checker, check_events
from ks_conformance.protocol import Capabilities, InProcessConnection
from ks_conformance.results import RunResult, settings_for
from ks_conformance.stdio import StdioConnection
from ks_conformance.suite import run_suite
from ks_reference.adapter import CAPABILITIES, ReferenceAdapter

QUICK = {"max_examples": 12, "examples_total": 24, "rounds": 2, "coverage_rounds": 0, "determinism_replays": 1}
"""A short run: enough to exercise the behaviour under test, a few seconds each."""


def _run(adapter: ReferenceAdapter, **capabilities: Any) -> RunResult:
    """Run a short `ci` search against an adapter object declaring the reference's capabilities with overrides."""

    class Declaring(type(adapter)):  # type: ignore[misc]
        def start(self) -> dict[str, Any]:
            info = super().start()
            info["capabilities"] = {**CAPABILITIES, **capabilities}
            return info

    declaring = Declaring(durable=False)
    return run_suite(lambda: InProcessConnection(declaring, "py:test"), settings_for("ci", 0, **QUICK))


def _assert_clean(result: RunResult) -> None:
    """No violation and no fault: conformant, or unknown only because a short run left some MUST unexercised."""
    assert not result.faults, [fault.message for fault, _ in result.faults]
    assert not result.anomalies, [(a.name, a.explanation.then) for a in result.anomalies][:3]
    if result.verdict != "conformant":
        assert result.verdict == "unknown"
        assert any(r["status"] == "vacuous" for r in result.requirements)


def _status(result: RunResult, identifier: str) -> dict[str, Any]:
    return next(r for r in result.requirements if r["id"] == identifier)


BASE = {**WITHOUT_ZOMBIES, "profiles": ["owner"], "selectors": ["ring"], "poison_policies": ["drop"]}
"""The reference's ops and options as the mutants draw them (without the ones added since 1.6, which change the
search that the short budget was tuned for)."""


def test_no_key_affinity_is_conformant_and_skips_the_assignment_rules() -> None:
    result = _run(ReferenceAdapter(durable=False), **{**BASE, "profiles": ["strict"], "selectors": ["any"]})
    _assert_clean(result)
    assert _status(result, "KS-ISO-1")["status"] == "passed"
    assert _status(result, "KS-ASN-2")["status"] == "skipped"
    assert "any" in _status(result, "KS-ASN-2")["reason"]


def test_a_cursorless_system_is_conformant_with_the_cursor_rules_skipped() -> None:
    result = _run(bugs.CursorlessAdapter(durable=False), **BASE, cursor=False, persist_ack_holes=False)
    _assert_clean(result)
    for identifier in ("KS-CUR-1", "KS-CUR-2"):
        line = _status(result, identifier)
        assert line["status"] == "skipped" and "cursor" in line["reason"]
    assert _status(result, "KS-CUR-4")["status"] == "passed"


def test_a_declared_terminal_outcome_is_judged_as_its_resolution() -> None:
    result = _run(bugs.OutcomeAdapter(durable=False), **BASE, terminal_outcomes={"discarded": "dropped"})
    _assert_clean(result)
    assert result.exercised.get("unjustified-resolution", 0) > 0


def test_declared_values_are_the_only_ones_drawn_and_a_check_that_needs_others_is_skipped() -> None:
    seen: list[Mapping[str, Any]] = []

    class Recording(ReferenceAdapter):
        def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
            response = super().reset(config)
            if response.get("ok"):  # the KS-CFG-1 probes send invalid values on purpose; they are refused
                seen.append(dict(config))
            return response

    values = {"backoff_base": [0], "backoff_max": [0], "evict_after": [1]}
    result = _run(Recording(durable=False), **{**BASE, "config_values": values})
    drawn = [c for c in seen if "backoff_base" in c]
    assert drawn and all(c["backoff_base"] == 0 and c["backoff_max"] == 0 for c in drawn)
    assert all(c.get("evict_after", 1) == 1 for c in seen)
    line = _status(result, "KS-RTY-4")
    assert line["status"] == "skipped" and "backoff_base" in line["reason"], line


def test_refusing_an_undeclared_value_skips_what_needs_it_instead_of_a_fault() -> None:
    class NoDebounce(ReferenceAdapter):
        def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
            if config.get("persist_interval", 0) != 0:
                message = "only eager persistence"
                return {
                    "ok": False,
                    "error": {"code": "invalid_config", "message": message, "field": "persist_interval"},
                }
            return super().reset(config)

    result = _run(NoDebounce(durable=False), **BASE)
    _assert_clean(result)
    assert set(result.refused_values["persist_interval"]) <= {1, 2, 3}
    assert result.refused_values["persist_interval"]


def test_without_held_events_the_rules_only_they_show_are_skipped_with_the_other_evidence() -> None:
    result = _run(ReferenceAdapter(durable=False), **BASE, held_events=False)
    for identifier, other in (("KS-FLW-3", "key-reorder"), ("KS-DRN-2", "stuck-key")):
        line = _status(result, identifier)
        assert line["status"] == "skipped" and other in line["reason"], line


V1_ADAPTER = textwrap.dedent(
    """
    import json, sys
    from ks_reference.adapter import CAPABILITIES, IMPLEMENTATION, create
    adapter = create()
    for line in sys.stdin:
        request = json.loads(line)
        command = request["cmd"]
        if command == "start":
            if request["version"] != 1:
                print("only protocol version 1", file=sys.stderr)
                sys.exit(2)
            answer = {"version": 1, "implementation": dict(IMPLEMENTATION), "capabilities": CAPABILITIES}
        elif command == "stop":
            break
        elif command == "reset":
            answer = adapter.reset(request["config"])
        else:
            answer = adapter.op(request["op"])
        if "seq" in request:
            answer = {"seq": request["seq"], **answer}
        print(json.dumps(answer), flush=True)
    """
)


def test_a_v1_adapter_that_exits_on_version_2_is_started_again_with_version_1(tmp_path: Path) -> None:
    script = tmp_path / "v1_adapter.py"
    script.write_text(V1_ADAPTER, encoding="utf-8")
    connection = StdioConnection(f"{sys.executable} {script}")
    try:
        info = connection.start()
        assert info.version == 1
        assert connection.reset({"profile": "strict", "selector": "ring"}).ok
        outcome = connection.op({"op": "add_consumer", "consumer": "c1", "capacity": 1, "filters": []})
        assert outcome.ok
    finally:
        connection.close()


def test_capabilities_v2_fields_are_read_and_checked() -> None:
    declared = Capabilities.from_json(
        {
            "profiles": ["strict"],
            "selectors": ["any"],
            "ops": ["publish"],
            "flow_control": False,
            "window": True,
            "cursor": False,
            "config_values": {"ack_timeout": [30]},
            "terminal_outcomes": {"aborted": None, "failed": "dead_lettered"},
        }
    )
    assert (declared.capacity, declared.window, declared.cursor) == (False, True, False)
    assert declared.declared() == {"cursor": False, "terminal_outcomes": {"aborted": None, "failed": "dead_lettered"}}
    with pytest.raises(Exception, match=r"config_values\.speed"):
        Capabilities.from_json(
            {"profiles": ["strict"], "selectors": ["any"], "ops": [], "config_values": {"speed": [1]}}
        )
    with pytest.raises(Exception, match=r"terminal_outcomes\.x"):
        Capabilities.from_json(
            {"profiles": ["strict"], "selectors": ["any"], "ops": [], "terminal_outcomes": {"x": "vanished"}}
        )


# --- the checker: op boundaries and non-member deliveries --------------------------------------------


def _feed(checker: Checker, events: list[dict[str, Any]]) -> None:
    for seq, event in enumerate(events):
        checker.feed({"seq": seq, "tick": 0, **event})
    checker.finish()


CONFIG = {"event": "config", "detail": json.dumps({"trace_version": 1, "config": {"profile": "owner"}})}


def test_an_ack_effect_of_a_removal_stays_in_the_removal_when_ops_are_marked() -> None:
    events = [
        CONFIG,
        {"event": "consumer_added", "consumer": "c1", "capacity": 2, "filters": []},
        {"event": "publish", "offset": 0, "key": "k"},
        {"event": "deliver", "offset": 0, "key": "k", "consumer": "c1", "attempt": 1},
        {"event": "consumer_removed", "consumer": "c1"},
        {"event": "ack", "offset": 0, "key": "k", "consumer": "c1"},
    ]
    inferred, marked = Checker(), Checker()
    marked.explicit_ops = True
    _feed(inferred, events)
    _feed(marked, events)
    assert marked.op_count == inferred.op_count - 1  # the ack did not open an op of its own
    assert "stale-ack-accepted" in {a.name for a in marked.anomalies}


def test_durable_attempts_count_across_a_restart_only_when_declared() -> None:
    def trace(declared: dict[str, Any] | None) -> list[str]:
        t = TraceBuilder(profile="strict", selector="ring", declared=declared).add("c1")
        t.deliver(t.publish("k"), "c1")
        t.restart().add("c1").deliver(0, "c1", attempt=2)  # a database-kept count goes on after the crash
        return [a.name for a in check_events(t.events).anomalies]

    assert trace(None) == ["attempt-miscount"]
    assert trace({"durable_attempts": True}) == []


def test_two_deliveries_to_one_non_member_are_not_a_split_owner() -> None:
    events = [
        CONFIG,
        {"event": "consumer_added", "consumer": "c1", "capacity": 2, "filters": []},
        {"event": "consumer_removed", "consumer": "c1"},
        {"event": "publish", "offset": 0, "key": "k"},
        {"event": "publish", "offset": 1, "key": "k"},
        {"event": "deliver", "offset": 0, "key": "k", "consumer": "c1", "attempt": 1},
        {"event": "deliver", "offset": 1, "key": "k", "consumer": "c1", "attempt": 1},
    ]
    checker = Checker()
    _feed(checker, events)
    names = {a.name for a in checker.anomalies}
    assert "split-owner" not in names
    assert names  # the deliveries to a non-member are reported (inactive-delivery)


def test_filter_rules_are_skipped_when_no_declared_selector_takes_filters() -> None:
    """Buckets refuse filters (spec section 5): an adapter that has filters but declares only `buckets` is never
    drawn one, so the filter rules are skipped with that reason, not vacuous."""
    result = _run(ReferenceAdapter(durable=False), **{**BASE, "selectors": ["buckets"]})
    _assert_clean(result)
    for identifier in ("KS-FLT-2", "KS-FLT-3", "KS-FLT-4"):
        line = _status(result, identifier)
        assert line["status"] == "skipped" and "a selector that takes them" in line["reason"], line
