"""Conformance vectors (spec/vectors/README.md): frozen scenarios any dispatcher replays in seconds.

A vector is a scenario file whose header carries a `vector` annotation: the requirements it targets, the
mutants known to fail it and its recorded traces. A conformant dispatcher passes every vector; replaying
one is the same replay and the same checks as `keyshared conformance replay`, judged per requirement.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from ks_spec import paths
from ks_spec.errors import MissingInput, UserError

from ks_conformance.anomalies import Anomaly, Explanation, requirement_levels
from ks_conformance.protocol import AdapterFault, Capabilities, Connection
from ks_conformance.rules import BY_NAME, rules_of
from ks_conformance.scenario import Scenario, read_scenario, replay, unmet
from ks_conformance.tracefile import events_signature

VECTORS_DIR = paths.SPEC_DIR / "vectors"
"""The frozen corpus shipped with the spec."""
VECTOR_SCHEMA = VECTORS_DIR / "vector-v1.schema.json"
VECTOR_SUFFIX = ".vector.jsonl"
TRACE_SUFFIX = ".trace.jsonl"

STATUSES = ("failed", "error", "warning", "passed", "skipped")
"""A vector's (and a requirement's) status, worst first."""

KIND_NEEDS: dict[str, tuple[str, str]] = {
    **{
        kind: ("cursor", "a persisted cursor (capability cursor)")
        for kind in (
            "cursor-skip",
            "cursor-regress",
            "cursor-stall",
            "persist-early",
            "persist-late",
            "restart-skip",
            "seek-unpersisted",
        )
    },
    "overtaken-hold": ("held_events", "held events (capability held_events)"),
    "drain-stuck": ("held_events", "held events (capability held_events)"),
    "capacity-overrun": ("capacity", "a binding capacity (capability capacity)"),
    "window-overrun": ("window", "a read-ahead window (capability window)"),
    "stats-mismatch": ("stats", "capability stats"),
    "blocked-key-hidden": ("stats", "capability stats"),
    "drop-uncounted": ("stats", "capability stats"),
    "nondeterministic": ("deterministic", "an adapter that declares itself deterministic"),
}
"""Anomaly kinds whose check needs a capability beyond the scenario's profile, selector and ops."""


@dataclass(frozen=True)
class Caught:
    """A mutant known to fail a vector, and the anomaly kinds its replay shows."""

    mutant: str
    anomalies: tuple[str, ...]


@dataclass(frozen=True)
class RecordedTrace:
    """A trace recorded by replaying the vector, with the anomaly kinds a trace checker must report on it."""

    path: Path
    implementation: str
    anomalies: tuple[str, ...]


@dataclass(frozen=True)
class Vector:
    """One vector file: its scenario and what the annotation says about it."""

    path: Path
    name: str
    """The path below the corpus folder without the suffix: `KS-ORD-1/newest_first`."""
    scenario: Scenario
    targets: tuple[str, ...]
    kinds: tuple[str, ...]
    caught: tuple[Caught, ...]
    traces: tuple[RecordedTrace, ...]
    refused_config: str | None = None
    determinism: bool = False


@cache
def _annotation_validator() -> Any:
    import jsonschema

    with open(VECTOR_SCHEMA, encoding="utf-8") as handle:
        return jsonschema.Draft7Validator(json.load(handle))


def read_vector(path: Path, root: Path) -> Vector:
    """Read a vector file and check its annotation; UserError (exit 65) names the file and field of a problem."""
    scenario = read_scenario(path)

    def bad(place: str, message: str) -> UserError:
        return UserError(f"{path}:1: field 'vector{place}': {message}")

    if not scenario.vector:
        raise bad("", "missing: a vector's header carries a 'vector' annotation (spec/vectors/README.md)")
    errors = list(_annotation_validator().iter_errors(scenario.vector))
    if errors:
        first = min(errors, key=lambda e: len(list(e.absolute_path)))
        place = "".join(f".{p}" for p in first.absolute_path)
        raise bad(place, first.message)
    note = scenario.vector
    checked = {kind.requirement for kind in BY_NAME.values()}
    for number, target in enumerate(note["targets"]):
        if target not in checked:
            raise bad(f".targets.{number}", f"{target} is not a requirement with a check (spec/checking.md)")
    own = {kind.name for target in note["targets"] for kind in rules_of(target)}
    for number, kind in enumerate(note["kinds"]):
        if kind not in own:
            raise bad(f".kinds.{number}", f"'{kind}' is not an anomaly kind of {', '.join(note['targets'])}")
    for where, kinds in [
        *((f".caught.{n}.anomalies", c["anomalies"]) for n, c in enumerate(note["caught"])),
        *((f".traces.{n}.anomalies", t["anomalies"]) for n, t in enumerate(note["traces"])),
    ]:
        unknown = [kind for kind in kinds if kind not in BY_NAME]
        if unknown:
            raise bad(where, f"'{unknown[0]}' is not an anomaly kind (spec/checking.md)")
    traces = []
    for number, trace in enumerate(note["traces"]):
        file = path.parent / trace["file"]
        if not file.is_file():
            raise bad(f".traces.{number}.file", f"no such file next to the vector: {trace['file']}")
        traces.append(RecordedTrace(file, trace["implementation"], tuple(trace["anomalies"])))
    refused = note.get("refused_config")
    if refused is not None and scenario.steps:
        raise bad(".refused_config", "a vector whose configuration must be refused has no steps")
    relative = path.relative_to(root) if path.is_relative_to(root) else Path(path.name)
    return Vector(
        path,
        relative.as_posix().removesuffix(VECTOR_SUFFIX),
        scenario,
        tuple(note["targets"]),
        tuple(note["kinds"]),
        tuple(Caught(c["mutant"], tuple(c["anomalies"])) for c in note["caught"]),
        tuple(traces),
        refused,
        bool(note.get("determinism", False)),
    )


def find_vectors(folder: Path, only: Collection[str] = ()) -> list[Vector]:
    """Every `*.vector.jsonl` below `folder`, in name order; with `only`, those targeting one of those IDs."""
    if not folder.is_dir():
        raise MissingInput(f"{folder}: no such vector folder")
    files = sorted(folder.rglob(f"*{VECTOR_SUFFIX}"))
    if not files:
        raise MissingInput(f"{folder}: no vector files (*{VECTOR_SUFFIX})")
    vectors = [read_vector(file, folder) for file in files]
    if only:
        vectors = [v for v in vectors if set(v.targets) & set(only)]
    return vectors


# --- replaying -------------------------------------------------------------------------------------


@dataclass
class VectorResult:
    """What replaying one vector against one adapter showed."""

    vector: Vector
    status: str
    reason: str = ""
    """Why it was skipped, or the adapter fault."""
    anomalies: list[Anomaly] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    exercised: dict[str, int] = field(default_factory=dict)
    """How often each check was exercised in the replay (spec/checking.md section 2)."""

    @property
    def kinds(self) -> list[str]:
        """The anomaly kinds shown, sorted."""
        return sorted({a.name for a in self.anomalies})


def missing_capabilities(vector: Vector, capabilities: Capabilities) -> list[str]:
    """Why the adapter cannot take this vector: the scenario's needs it lacks, or no check of it can run."""
    scenario = vector.scenario
    if vector.refused_config is not None:  # the refused field is the point, not a need
        scenario = replace(scenario, config={k: v for k, v in scenario.config.items() if k != vector.refused_config})
    missing = unmet(scenario, capabilities)
    if missing:
        return [f"needs {', '.join(missing)}"]
    needs = [KIND_NEEDS[kind] for kind in vector.kinds if kind in KIND_NEEDS]
    reasons = [why for flag, why in needs if not getattr(capabilities, flag)]
    if len(reasons) == len(vector.kinds):
        return [f"its checks need {' and '.join(dict.fromkeys(reasons))}"]
    return []


def _status(anomalies: Sequence[Anomaly]) -> str:
    if any(a.level == "MUST" for a in anomalies):
        return "failed"
    return "warning" if anomalies else "passed"


def run_vector(
    vector: Vector,
    connection: Connection,
    capabilities: Capabilities,
    implementation: dict[str, Any],
    fresh: Callable[[], Connection],
) -> VectorResult:
    """Replay one vector on a started connection and judge it; `fresh` opens a newly started adapter (KS-GEN-5)."""
    missing = missing_capabilities(vector, capabilities)
    if missing:
        return VectorResult(vector, "skipped", "; ".join(missing))
    if vector.refused_config is not None:
        return _run_refusal(vector, connection)
    try:
        first = replay(vector.scenario, connection, capabilities, implementation)
        if first.refused_config:
            return VectorResult(vector, "skipped", f"the adapter refused the configuration ({first.refused_config})")
        assert first.session is not None
        result = VectorResult(
            vector,
            "passed",
            anomalies=first.anomalies,
            trace=list(first.session.trace),
            exercised={**first.session.checker.exercised, **first.session.harness_exercised},
        )
        if vector.determinism:
            result.exercised["nondeterministic"] = 1
            other = fresh()
            try:
                info = other.start()
                again = replay(vector.scenario, other, info.capabilities, info.implementation)
            finally:
                other.close()
            if again.session is not None:
                result.anomalies += _compare_runs(result.trace, list(again.session.trace), len(vector.scenario.steps))
    except AdapterFault as fault:
        return VectorResult(vector, "error", f"adapter fault ({fault.kind}): {fault.message}")
    result.status = _status(result.anomalies)
    return result


def _compare_runs(before: list[dict[str, Any]], after: list[dict[str, Any]], steps: int) -> list[Anomaly]:
    """A nondeterministic anomaly if two replays of the same steps gave different events (KS-GEN-5)."""
    one, two = events_signature(before), events_signature(after)
    if one == two:
        return []
    first = next((i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b), min(len(one), len(two)))
    return [
        Anomaly(
            "nondeterministic",
            first,
            (),
            Explanation(
                (f"the same {steps} steps replayed from a reset, then on a newly started adapter",),
                f"the runs differ from event {first} on, but the same operations give the same events (KS-GEN-5)",
            ),
        )
    ]


def _run_refusal(vector: Vector, connection: Connection) -> VectorResult:
    """The configuration must be refused with invalid_config naming the vector's field (KS-CFG-1)."""
    config, wanted = vector.scenario.config, vector.refused_config
    try:
        outcome = connection.reset(config)
    except AdapterFault as fault:
        return VectorResult(vector, "error", f"adapter fault ({fault.kind}): {fault.message}")
    why = ""
    if outcome.ok:
        why = "the adapter accepted it"
    elif outcome.code != "invalid_config":
        why = f"the adapter refused it with {outcome.code!r}, not 'invalid_config'"
    elif outcome.error_field != wanted:
        why = f"the refusal names field {outcome.error_field!r}, not {wanted!r}"
    result = VectorResult(vector, "passed", exercised={"config-accepted": 1})
    if why:
        result.anomalies.append(
            Anomaly(
                "config-accepted",
                -1,
                (),
                Explanation(
                    (f"config = {config}",),
                    f"{why}, but it must be refused with invalid_config naming the field {wanted!r} (KS-CFG-1)",
                ),
                {"config": config},
            )
        )
        result.status = "failed"
    return result


def run_vectors(
    vectors: Iterable[Vector],
    factory: Callable[[], Connection],
    on_result: Callable[[VectorResult], None] | None = None,
) -> list[VectorResult]:
    """Start the adapter once and replay every vector on it; StartFailed if it does not start."""
    connection = factory()

    def fresh() -> Connection:
        return factory()

    results: list[VectorResult] = []
    try:
        info = connection.start()
        for vector in vectors:
            result = run_vector(vector, connection, info.capabilities, dict(info.implementation), fresh)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        connection.close()
    return results


@dataclass
class RequirementRow:
    """One requirement's line of the vectors table: its status over the vectors that target it."""

    id: str
    level: str
    status: str
    counts: dict[str, int]
    notes: list[str]


def by_requirement(results: Sequence[VectorResult]) -> list[RequirementRow]:
    """Group results by target requirement, in ID order; a requirement's status is its worst vector's."""
    levels = requirement_levels()
    grouped: dict[str, list[VectorResult]] = {}
    for result in results:
        for target in result.vector.targets:
            grouped.setdefault(target, []).append(result)
    rows: list[RequirementRow] = []
    for requirement in sorted(grouped, key=_id_order):
        mine = grouped[requirement]
        counts: dict[str, int] = {}
        for result in mine:
            counts[result.status] = counts.get(result.status, 0) + 1
        ran = [r for r in mine if r.status != "skipped"]
        status = min((r.status for r in ran), key=STATUSES.index) if ran else "skipped"
        notes: dict[str, None] = {}
        for result in mine:
            if result.status in ("failed", "warning"):
                notes[f"{result.vector.name}: {', '.join(result.kinds)}"] = None
            elif result.status == "error" or status == "skipped":
                notes[result.reason] = None
        rows.append(RequirementRow(requirement, levels.get(requirement, "MUST"), status, counts, list(notes)))
    return rows


def _id_order(identifier: str) -> tuple[str, int]:
    area, _, number = identifier.removeprefix("KS-").rpartition("-")
    return area, int(number) if number.isdigit() else 0
