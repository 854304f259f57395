"""What a conformance run is told and what it returns: its settings (profiles `ci` and `thorough`), its findings
and the run's result with its verdict (spec/report-format.md section 2). Plain data, shared by the suite, the
requirement statuses and the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ks_spec.departures import DEPARTURES, declarable, departure_line

from ks_conformance import report
from ks_conformance.anomalies import Anomaly, requirement_levels
from ks_conformance.protocol import AdapterFault, Capabilities, StartInfo
from ks_conformance.scenario import Scenario
from ks_conformance.shrink import Shape


@dataclass(frozen=True)
class RunSettings:
    """How hard a run looks: Hypothesis examples and steps per round, rounds, and the seed."""

    profile: str
    max_examples: int
    """Hypothesis examples per stratum (profile x poison policy) and round, at least."""
    steps: int
    rounds: int
    """At most this many rounds per stratum, each of its examples (however many end at a new kind); the next
    round runs only if this one found something."""
    examples_total: int = 0
    """Examples per round over all strata: an implementation declaring few strata gets more per stratum."""
    seed: int = 0
    batch_chunk: int = 12
    """In batch mode: ops per replay while an example is drawn."""
    coverage_rounds: int = 2
    """Extra rounds over every stratum while a MUST requirement's checks were never exercised."""
    determinism_replays: int = 3
    shrinks: int = 100
    """Replays per witness when shrinking (shrink.py): a count, never seconds, so that one seed gives one result."""
    shrink_cap_seconds: int = 600
    """A wall-clock safety cap on shrinking one witness; the report lists it under `limits` if it ever fires."""
    shapes_per_kind: int = 3
    """Witnesses per anomaly kind at most, one per shape (shrink.py `Shape`); further shapes are only counted."""
    reproductions: int = 10
    """Nondeterministic adapters: replays of a witness that give its reproduction rate ("reproduced 3 of 10")."""
    shrink_tries: int = 3
    """Nondeterministic adapters: replays of a shrink candidate, kept if one of them shows the shape."""

    def examples_per_stratum(self, strata: int) -> int:
        """`max_examples`, or more when few strata share the `examples_total` budget."""
        return max(self.max_examples, -(-self.examples_total // max(strata, 1)))

    def to_json(self) -> dict[str, Any]:
        """For the report header."""
        return {
            "profile": self.profile,
            "seed": self.seed,
            "max_examples": self.max_examples,
            "examples_total": self.examples_total,
            "stateful_step_count": self.steps,
            "rounds": self.rounds,
            "shrinks": self.shrinks,
            "shrink_cap_seconds": self.shrink_cap_seconds,
            "batch_chunk": self.batch_chunk,
            "coverage_rounds": self.coverage_rounds,
            "shapes_per_kind": self.shapes_per_kind,
            "reproductions": self.reproductions,
            "shrink_tries": self.shrink_tries,
        }


PROFILES = {
    "ci": RunSettings("ci", max_examples=30, steps=40, rounds=3, examples_total=210, shrinks=100),
    "thorough": RunSettings("thorough", max_examples=300, steps=80, rounds=8, examples_total=2100, shrinks=500),
}
"""`ci` runs in about a minute against the reference; `thorough` is for nightly runs."""


def settings_for(profile: str, seed: int = 0, **overrides: Any) -> RunSettings:
    """The named settings profile with a seed (and any field overridden)."""
    base = PROFILES[profile]
    values = {**base.__dict__, "seed": seed, **overrides}
    return RunSettings(**values)


@dataclass
class Finding:
    """A violation found by a round, with the scenario that reproduces it."""

    anomalies: list[Anomaly]
    config: dict[str, Any]
    scenario: Scenario
    trace: list[dict[str, Any]]
    path: Path | None = None
    earlier: list[Anomaly] = field(default_factory=list)
    """Anomalies of kinds found before that the same example showed first: this one may be their consequence."""
    shrunk: bool = True
    """False when replaying the example did not show the kind again, so it could not be shrunk: the scenario is
    the example as it ran."""
    shape: Shape | None = None
    """The shape of its anomaly (a kind seen with several causes has a finding per cause)."""
    examples: int = 0
    """How many examples of the run (shrink replays included) showed the shape."""
    triggers: dict[str, int] = field(default_factory=dict)
    """Per op the shape was found in, how many of those examples."""
    reproduced: tuple[int, int] | None = None
    """A nondeterministic adapter: (replays that showed the shape, replays made) of the witness's scenario."""


@dataclass
class RunResult:
    """Everything a run found, ready to be rendered as a report."""

    adapter: str
    transport: str
    info: StartInfo
    capabilities: Capabilities
    settings: RunSettings
    findings: list[Finding] = field(default_factory=list)
    faults: list[tuple[AdapterFault, Path | None]] = field(default_factory=list)
    exercised: dict[str, int] = field(default_factory=dict)
    skipped_ops: dict[str, str] = field(default_factory=dict)
    refused_values: dict[str, list[Any]] = field(default_factory=dict)
    """Undeclared configuration values the adapter refused (their requirements may be skipped)."""
    examples: int = 0
    steps: int = 0
    started: str = ""
    duration: float = 0.0
    requirements: list[dict[str, Any]] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)
    """Wall-clock safety caps that fired: where the run's result may depend on the machine's speed."""
    departures: dict[str, int] = field(default_factory=dict)
    """Per departure (spec section 21.1) by label: how many examples ran under a configuration taking it."""

    @property
    def anomalies(self) -> list[Anomaly]:
        """Every anomaly of every finding."""
        return [a for f in self.findings for a in f.anomalies]

    @property
    def verdict(self) -> str:
        """conformant, not-conformant or unknown (spec/report-format.md section 2)."""
        if any(r["status"] == "failed" for r in self.requirements):
            return "not-conformant"
        if self.faults or any(r["status"] == "vacuous" and r["level"] == "MUST" for r in self.requirements):
            return "unknown"
        return "conformant"


def report_lines(result: RunResult) -> list[dict[str, Any]]:
    """The run as a report (spec/report-format.md)."""
    lines: list[dict[str, Any]] = [
        report.header(
            "conformance",
            protocol_version=result.info.version,
            adapter=result.adapter,
            transport=result.transport,
            implementation=result.info.implementation,
            capabilities=result.capabilities.to_json(),
            settings=result.settings.to_json(),
            started=result.started,
            **({"refused_config_values": result.refused_values} if result.refused_values else {}),
        )
    ]
    lines += result.requirements
    sheet = departure_lines(result)
    lines += sheet
    for finding in sorted(result.findings, key=lambda f: f.anomalies[0].requirement if f.anomalies else ""):
        events_by_seq = {event["seq"]: event for event in finding.trace}
        for anomaly in finding.anomalies:
            line = {"type": "violation", **anomaly.to_json(), "config": finding.config}
            line["events"] = [events_by_seq[s] for s in anomaly.witness if s in events_by_seq]
            if not finding.shrunk:
                line["shrunk"] = False
            if finding.shape is not None and finding.shape.kind == anomaly.name:
                shape = {"cause": finding.shape.cause, "examples": finding.examples}
                line["shape"] = {**shape, "triggers": dict(sorted(finding.triggers.items()))}
            if finding.reproduced is not None:
                line["reproduced"] = {"shown": finding.reproduced[0], "replays": finding.reproduced[1]}
            if finding.earlier:
                line["preceded_by"] = [{"anomaly": a.name, "seq": a.seq} for a in finding.earlier]
            if finding.path is not None:
                line["scenario"] = str(finding.path)
            lines.append(line)
    for fault, path in result.faults:
        error = {"type": "error", **fault.to_json()}
        if path is not None:
            error["scenario"] = str(path)
        lines.append(error)
    counts: dict[str, int] = {}
    for requirement in result.requirements:
        counts[requirement["status"]] = counts.get(requirement["status"], 0) + 1
    levels = requirement_levels()
    lines.append(
        {
            "type": "footer",
            "verdict": result.verdict,
            "counts": counts,
            "observed_anomalies": sorted({a.name for a in result.anomalies}),
            "violated": sorted({a.requirement for a in result.anomalies if levels.get(a.requirement) == "MUST"}),
            "warnings": sorted({a.requirement for a in result.anomalies if levels.get(a.requirement) != "MUST"}),
            "departures": [line["choice"] for line in sheet],
            "examples": result.examples,
            "steps": result.steps,
            "duration_s": round(result.duration, 3),
            "finished": report.now_iso(),
            **({"limits": result.limits} if result.limits else {}),
        }
    )
    return lines


def departure_lines(result: RunResult) -> list[dict[str, Any]]:
    """The departures sheet (spec section 21.1): every declared choice weaker than strict Key-Shared, and any the
    run's configurations took without a declaration (an adapter's draws are the kit's, so this stays empty)."""
    declared = {departure.label for departure in declarable(result.capabilities.to_json())}
    return [
        departure_line(departure, departure.label in declared, result.departures.get(departure.label, 0))
        for departure in DEPARTURES
        if departure.label in declared or result.departures.get(departure.label, 0)
    ]
