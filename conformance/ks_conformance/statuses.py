"""How a conformance run's checks become requirement statuses (spec/report-format.md).

`check_needs` says which rules of spec/checking.md the capabilities an adapter declares can exercise at all (the
kit never draws what an adapter cannot do, so those requirements are *skipped*, with the reason);
`requirement_statuses` turns a run's findings and exercise counts into one status per requirement: failed or
warning, passed, vacuous (applicable but never exercised), skipped or untested.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS, OUT_OF_ORDER_KINDS
from ks_spec.requirements import load_index

from ks_conformance.anomalies import Anomaly
from ks_conformance.harness import FILTER_SELECTORS_REFUSED
from ks_conformance.protocol import Capabilities
from ks_conformance.results import RunResult
from ks_conformance.rules import INDIRECT, Abilities, rule, rules_of
from ks_conformance.search import usable_values


def abilities(
    capabilities: Capabilities, skipped: Mapping[str, str], refused: Mapping[str, Sequence[Any]] | None = None
) -> Abilities:
    """What the kit may draw against an adapter: its declared capabilities less the ops it skipped and the values
    it refused (what the rules' `needs` read)."""
    refusals = refused or {}

    def forms(field_name: str) -> list[Any]:
        declared = capabilities.config_values.get(field_name, [CONFIG_DEFAULTS[field_name]])
        return [v for v in declared if v not in refusals.get(field_name, ())]

    return Abilities(
        ops=frozenset(capabilities.ops) - frozenset(skipped),
        selectors=frozenset(capabilities.selectors),
        policies=frozenset(capabilities.poison_policies),
        profiles=tuple(capabilities.profiles),
        declared=capabilities.config_values,
        usable=lambda field_name: usable_values(capabilities, refusals, field_name),
        forms=forms,
        refused=refusals,
        filters=capabilities.filters,
        filter_selectors_refused=FILTER_SELECTORS_REFUSED,
        ack_timeout=capabilities.ack_timeout,
        timers=capabilities.timers,
        cursor=capabilities.cursor,
        capacity=capabilities.capacity,
        window=capabilities.window,
        stats=capabilities.stats,
        held_events=capabilities.held_events,
        deterministic=capabilities.deterministic,
        key_batches=capabilities.key_batches,
    )


def check_needs(
    name: str,
    capabilities: Capabilities,
    skipped: Mapping[str, str],
    refused: Mapping[str, Sequence[Any]] | None = None,
) -> str | None:
    """Why an anomaly's rule cannot be exercised against these capabilities, or None if it can."""
    return needs_of(name, abilities(capabilities, skipped, refused))


def needs_of(name: str, able: Abilities) -> str | None:
    """Why an anomaly's rule cannot be exercised with these abilities, or None if it can."""
    if name in OUT_OF_ORDER_KINDS and False not in able.forms("out_of_order"):
        return "key order kept (the implementation declares only out_of_order: true, a departure of spec section 21.1)"
    return rule(name).needs(able)


def skip_reason(missing: list[str]) -> str:
    """One reason for a requirement none of whose checks can run: each check's need (before its first "; ") once,
    joined by "or", then the notes that follow the needs ("needs X: note one; note two")."""
    needs: list[str] = []
    notes: list[str] = []
    for why in missing:
        need, note = _split_note(why)
        if need not in needs:
            needs.append(need)
        if note and note not in notes:
            notes.append(note)
    return "needs " + " or ".join(sorted(needs)) + (": " + "; ".join(notes) if notes else "")


def _split_note(why: str) -> tuple[str, str]:
    """A check's need and its note: split at the first "; " outside parentheses."""
    depth = 0
    for index, char in enumerate(why):
        depth += (char == "(") - (char == ")")
        if depth == 0 and why.startswith("; ", index):
            return why[:index], why[index + 2 :]
    return why, ""


def requirement_statuses(result: RunResult) -> list[dict[str, Any]]:
    """One `requirement` line per requirement of the spec, in spec order."""
    capabilities = result.capabilities
    able = abilities(capabilities, result.skipped_ops, result.refused_values)
    violations: dict[str, list[Anomaly]] = {}
    for anomaly in result.anomalies:
        violations.setdefault(anomaly.requirement, []).append(anomaly)
    lines: list[dict[str, Any]] = []
    for entry in load_index():
        identifier, level, title = str(entry["id"]), str(entry["level"]), str(entry["title"])
        profiles = [str(p) for p in entry["profiles"]]  # type: ignore[attr-defined]
        checks = [k.name for k in rules_of(identifier)]
        line: dict[str, Any] = {
            "type": "requirement",
            "id": identifier,
            "title": title,
            "level": level,
            "checks": checks,
            "exercised": {name: result.exercised.get(name, 0) for name in checks},
        }
        tested_profiles = [p for p in capabilities.profiles if p in profiles]
        found = violations.get(identifier, [])
        line["violations"] = len(found)
        if not tested_profiles:
            line.update(
                status="skipped",
                reason=f"applies to {', '.join(profiles)}; the implementation declares "
                f"{', '.join(capabilities.profiles)}",
            )
        elif not checks:
            line.update(status="untested", reason=INDIRECT.get(identifier, "no check of its own"))
        elif found:
            line["status"] = "failed" if level == "MUST" else "warning"
        else:
            missing = [needs_of(name, able) for name in checks]
            usable = [name for name, why in zip(checks, missing, strict=True) if not why]
            if not usable:
                line.update(status="skipped", reason=skip_reason([why for why in missing if why]))
            elif sum(result.exercised.get(name, 0) for name in usable) == 0:
                line.update(status="vacuous", reason="its checks were never exercised in this run")
            else:
                line["status"] = "passed"
        lines.append(line)
    return lines
