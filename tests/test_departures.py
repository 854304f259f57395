"""The departures sheet (spec section 21.1, issue 28 item 3): a declared choice weaker than strict Key-Shared is
judged by its own rule and named in every report, never counted as a failure."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ks_conformance import report
from ks_conformance.builder import TraceBuilder
from ks_conformance.protocol import InProcessConnection
from ks_conformance.results import report_lines, settings_for
from ks_conformance.suite import run_suite
from ks_conformance.tracefile import check_trace
from ks_conformance.tracefile import report_lines as trace_report_lines
from ks_reference import presets
from ks_reference.presets import Preset, PresetAdapter
from ks_spec import paths
from ks_spec.departures import DEPARTURES, GUARANTEES, declarable, departures_of
from ks_spec.trace import write_trace

SMALL = {"rounds": 1, "coverage_rounds": 0, "examples_total": 24}
"""A short run: enough examples for every declared choice to be drawn, not a verdict anyone relies on."""


def _section_21_1_rows() -> list[list[str]]:
    text = (paths.SPEC_DIR / "key-shared.md").read_text(encoding="utf-8")
    section = text.split("### 21.1 Declared departures", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_section_21_1_is_the_departures_table_row_by_row() -> None:
    rows = _section_21_1_rows()
    assert [row[0].strip("`") for row in rows] == [d.label for d in DEPARTURES]
    for row, departure in zip(rows, DEPARTURES, strict=True):
        relaxes = re.findall(r"KS-[A-Z]+-\d+", row[3])
        assert (row[1], row[2], tuple(relaxes)) == (departure.guarantee, departure.rule, departure.relaxes), row[0]
        assert departure.guarantee in GUARANTEES


def test_a_configuration_takes_exactly_the_departures_its_values_name() -> None:
    assert departures_of({}) == []  # every default is strict Key-Shared
    taken = departures_of({"profile": "owner", "selector": "ring", "returns_as_failures": True})
    assert [d.label for d in taken] == ["profile = owner", "returns_as_failures = true"]
    assert departures_of({"returns_as_failures": False, "poison_policy": "dead-letter"}) == []


def test_an_adapter_declares_a_departure_by_listing_it() -> None:
    capabilities = {
        "profiles": ["strict"],
        "selectors": ["ring", "any"],
        "poison_policies": ["block", "drop"],
        "config_values": {"returns_as_failures": [False], "drain_granularity": ["key", "hash"]},
    }
    labels = [d.label for d in declarable(capabilities)]
    assert labels == ["selector = any", "drain_granularity = hash", "poison_policy = drop"]


def _run(factory: Callable[[], PresetAdapter]) -> list[dict[str, Any]]:
    result = run_suite(lambda: InProcessConnection(factory(), "preset"), settings_for("ci", 0, **SMALL))
    return report_lines(result)


def _strict_only() -> PresetAdapter:
    """The reference narrowed to strict Key-Shared: strict, a ring, dead-lettering, no option."""
    return PresetAdapter(Preset("strict-only", "", "strict", "ring", {}, {"poison_policies": ["dead-letter"]}))


def test_a_run_names_its_declared_departures_in_every_rendering() -> None:
    lines = _run(presets.task_queue)
    assert all(report.schema_problem(line) is None for line in lines)
    sheet = [line for line in lines if line["type"] == "departure"]
    assert [line["choice"] for line in sheet] == ["selector = any", "returns_as_failures = true"]
    assert all(line["declared"] is True and line["in_effect"] > 0 for line in sheet)
    assert lines[-1]["departures"] == ["selector = any", "returns_as_failures = true"]
    assert lines[-1]["verdict"] != "not-conformant"  # a declared departure is never a failure
    markdown = report.to_markdown(lines)
    assert "## Departures from strict Key-Shared" in markdown
    assert "| `returns_as_failures = true` | at-least-once | KS-RTY-6 | KS-RTY-7 |" in markdown
    assert "at-least-once (returns_as_failures = true)" in report.departure_summary(lines)
    assert 'name="departures" value="departs from strict Key-Shared in key affinity' in report.to_junit(lines)


def test_a_system_that_declares_nothing_weaker_has_an_empty_sheet() -> None:
    lines = _run(_strict_only)
    assert [line for line in lines if line["type"] == "departure"] == []
    assert lines[-1]["departures"] == []
    assert "None: every guarantee of strict Key-Shared" in report.to_markdown(lines)
    assert report.departure_summary(lines) == "no departure from strict Key-Shared declared"


def test_check_trace_lists_the_departures_the_traces_configurations_take(tmp_path: Path) -> None:
    t = TraceBuilder(profile="owner", max_redeliveries=1, returns_as_failures=True).add("c1")
    t.deliver(t.publish("k"), "c1")
    t.ack(0, "c1").persisted(1)
    write_trace(t.events, tmp_path / "one.jsonl")
    write_trace(TraceBuilder(profile="strict").events, tmp_path / "two.jsonl")
    results = [check_trace(tmp_path / "one.jsonl"), check_trace(tmp_path / "two.jsonl")]
    lines = trace_report_lines(results, 1)
    assert all(report.schema_problem(line) is None for line in lines)
    sheet = {line["choice"]: line["in_effect"] for line in lines if line["type"] == "departure"}
    assert sheet == {"profile = owner": 1, "returns_as_failures = true": 1}
    assert all("declared" not in line for line in lines if line["type"] == "departure")


def test_the_spec_readme_maps_every_declarable_departure_to_a_seed_behaviour() -> None:
    """spec/README's table of seed behaviours names every option of the sheet, so a team finds its choice there."""
    text = (paths.SPEC_DIR / "README.md").read_text(encoding="utf-8")
    table = text.split("## Seed behaviours and the options that declare them", 1)[1].split("\n## ", 1)[0]
    declared_as = [row.split("|")[3] for row in table.splitlines() if row.startswith("| ") and "---" not in row]
    named = {option for cell in declared_as for option in re.findall(r"`(\w+)", cell)}
    options = {d.option for d in DEPARTURES if d.option not in ("profile", "poison_policy")}
    assert options <= named | {"selector"}, options - named


def test_a_system_that_only_gives_up_key_order_has_its_order_checks_skipped_with_the_reason() -> None:
    """out_of_order declared alone: the checks it gives up are skipped (never vacuous, which would make the verdict
    unknown), with the reason; declared beside false, they still run in the examples that keep key order."""
    from ks_conformance.protocol import Capabilities
    from ks_conformance.statuses import check_needs

    ops = ("publish", "add_consumer", "remove_consumer", "ack", "nack", "tick")
    only = Capabilities(("owner",), ("ring",), ops, held_events=True, config_values={"out_of_order": [True]})
    both = Capabilities(("owner",), ("ring",), ops, held_events=True, config_values={"out_of_order": [False, True]})
    for kind in ("split-owner", "key-reorder", "retry-overtaken", "overtaken-hold"):
        assert "out_of_order" in (check_needs(kind, only, {}) or ""), kind
        assert check_needs(kind, both, {}) is None, kind


def test_an_advance_trigger_without_a_flush_skips_the_cursor_stall_check_with_its_reason() -> None:
    """persist_trigger advance declared alone gives up KS-LIV-2 (an idle cursor may stay unwritten): cursor-stall is
    skipped with the reason, not left vacuous; with a flush or the timer also declared it runs."""
    from ks_conformance.protocol import Capabilities
    from ks_conformance.statuses import check_needs

    ops = ("publish", "add_consumer", "ack", "tick")

    def declaring(**values: list[object]) -> Capabilities:
        return Capabilities(("strict",), ("ring",), ops, cursor=True, config_values=dict(values))

    assert "persist_flush" in (check_needs("cursor-stall", declaring(persist_trigger=["advance"]), {}) or "")
    assert check_needs("cursor-stall", declaring(persist_trigger=["advance"], persist_flush=[0, 2]), {}) is None
    assert check_needs("cursor-stall", declaring(persist_trigger=["tick", "advance"]), {}) is None
    assert check_needs("cursor-stall", declaring(), {}) is None


def test_delayed_delivery_declared_only_where_the_spec_refuses_it_is_skipped_with_the_reason() -> None:
    """publish_delayed under selector buckets alone is refused by spec section 6, so its checks are skipped with the
    reason (a run of such an adapter is not left vacuous, which would make its verdict unknown)."""
    from ks_conformance.protocol import Capabilities
    from ks_conformance.statuses import check_needs

    ops = ("publish", "publish_delayed", "add_consumer", "ack", "tick")
    buckets = Capabilities(("owner",), ("buckets",), ops)
    ring = Capabilities(("owner",), ("ring", "buckets"), ops)
    for kind in ("delivered-before-due", "blocked-behind-delayed", "due-left-waiting"):
        assert "buckets" in (check_needs(kind, buckets, {}) or ""), kind
        assert check_needs(kind, ring, {}) is None, kind
