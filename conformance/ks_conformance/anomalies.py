"""Anomaly records, their "Let ... Then ...: a contradiction" explanations, and verdicts.

Every checker of the kit (the trace checker, the conformance harness, the Spark validator) reports
anomalies as `Anomaly` records and renders them with `explain`, so that one violation reads the same
wherever it was found. Standard library and ks_spec only: importable without Hypothesis or Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Any

from ks_conformance.rules.registry import rule_named


class Verdict(StrEnum):
    """The verdict on a trace or a check (Jepsen's valid?): invalid outranks unknown outranks valid."""

    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"


_RANK = {Verdict.VALID: 0, Verdict.UNKNOWN: 1, Verdict.INVALID: 2}


def merge_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """The merged verdict of several checks (spec/checking.md section 4); valid when there are none."""
    return max(verdicts, key=_RANK.__getitem__, default=Verdict.VALID)


@cache
def requirement_levels() -> dict[str, str]:
    """Requirement ID -> MUST, SHOULD or MAY, from the generated index spec/requirements.json."""
    from ks_spec.requirements import load_index

    return {str(entry["id"]): str(entry["level"]) for entry in load_index()}


@cache
def requirement_profiles() -> dict[str, tuple[str, ...]]:
    """Requirement ID -> the profiles it applies to."""
    from ks_spec.requirements import load_index

    result: dict[str, tuple[str, ...]] = {}
    for entry in load_index():
        profiles = entry["profiles"]
        assert isinstance(profiles, list)
        result[str(entry["id"])] = tuple(str(p) for p in profiles)
    return result


@dataclass(frozen=True)
class Explanation:
    """An Elle-style explanation: the things involved ("Let"), then why they cannot all be so ("Then")."""

    let: tuple[str, ...]
    then: str

    def text(self) -> str:
        """One paragraph: "Let a; b. Then c: a contradiction." """
        lets = "; ".join(self.let)
        prefix = f"Let {lets}. " if lets else ""
        return f"{prefix}Then {self.then}: a contradiction."


@dataclass(frozen=True)
class Anomaly:
    """One violation found in a history: which anomaly, where, the events that prove it, and why.

    `seq` is the event at which it was found (for end-of-op checks: the op event, or the last event of
    the op); `witness` lists the seqs of the events that make the minimal proof, ascending.
    """

    name: str
    seq: int
    witness: tuple[int, ...]
    explanation: Explanation
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def requirement(self) -> str:
        """The requirement ID this anomaly violates."""
        return rule_named(self.name).requirement

    @property
    def level(self) -> str:
        """MUST or SHOULD: SHOULD anomalies are warnings."""
        return requirement_levels().get(self.requirement, "MUST")

    def to_json(self) -> dict[str, Any]:
        """The anomaly as a JSON object (the `violation` lines of a report use the same members)."""
        return {
            "anomaly": self.name,
            "id": self.requirement,
            "level": self.level,
            "seq": self.seq,
            "witness": list(self.witness),
            "explanation": {"let": list(self.explanation.let), "then": self.explanation.then},
            "text": self.explanation.text(),
            "details": dict(self.details),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Anomaly:
        """Read back what `to_json` wrote."""
        explanation = data["explanation"]
        return cls(
            name=str(data["anomaly"]),
            seq=int(data["seq"]),
            witness=tuple(int(s) for s in data["witness"]),
            explanation=Explanation(tuple(str(x) for x in explanation["let"]), str(explanation["then"])),
            details=dict(data.get("details", {})),
        )


def listing_order(anomaly: Anomaly) -> tuple[object, ...]:
    """The order a trace's anomalies are listed in, however the trace was judged (whole, or in shards of keys, whose
    findings arrive in no common order): by seq, then kind, witness and explanation."""
    return (anomaly.seq, anomaly.name, anomaly.witness, anomaly.explanation.let, anomaly.explanation.then)


def explain(anomaly: Anomaly) -> str:
    """The one-paragraph explanation, prefixed with the anomaly name and requirement."""
    return f"{anomaly.name} ({anomaly.requirement}) at seq {anomaly.seq}: {anomaly.explanation.text()}"


def verdict_of(anomalies: Iterable[Anomaly], undecidable: bool = False) -> Verdict:
    """invalid if any MUST anomaly, else unknown if the history could not be judged, else valid."""
    if any(a.level == "MUST" for a in anomalies):
        return Verdict.INVALID
    return Verdict.UNKNOWN if undecidable else Verdict.VALID


def describe_event(event: Mapping[str, Any]) -> str:
    """A short, stable rendering of a trace event for explanations: deliver(offset=3, key='k', ...) [seq 9]."""
    skip = {"seq", "tick", "event", "detail"}
    arguments = ", ".join(
        f"{name}={value!r}" for name, value in event.items() if name not in skip and value is not None
    )
    return f"{event.get('event')}({arguments}) [seq {event.get('seq')}, tick {event.get('tick')}]"
