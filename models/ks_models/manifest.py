"""The models manifest: every TLC configuration, how it must end, and its recorded figures.

`models/manifest.json` follows tlaplus/Examples: per configuration its mode, expected result
(and, for a failure, the property TLC must name) and the distinct-state count of passing runs,
so that a run that ends differently, or explores a different number of states, is a mismatch.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from ks_spec.errors import MissingInput, UserError

from ks_models import MANIFEST, MANIFEST_SCHEMA, MODELS_DIR
from ks_models.tlc import TlcOutcome, TlcRun, cfg_lists, run_tlc
from ks_models.traces import TraceVerdict, validate_trace


@dataclass(frozen=True)
class ModelEntry:
    """One TLC configuration of the manifest."""

    module: str
    data: dict[str, Any]

    @property
    def config(self) -> Path:
        """The .cfg file."""
        return MODELS_DIR / str(self.data["config"])

    @property
    def spec(self) -> Path:
        """The module TLC checks."""
        return MODELS_DIR / str(self.data["spec"])

    @property
    def name(self) -> str:
        """The configuration's name: its file name without .cfg."""
        return self.config.stem

    @property
    def tier(self) -> str:
        """quick or deep."""
        return str(self.data["tier"])

    @property
    def kind(self) -> str:
        """check, broken or permission."""
        return str(self.data["kind"])

    @property
    def expected(self) -> str:
        """'success', or 'safety failure on KS_X_n_Name' and the like."""
        prop = self.data.get("property")
        return f"{self.data['result']} on {prop}" if prop else str(self.data["result"])


@dataclass(frozen=True)
class TraceEntry:
    """One trace the manifest validates against KeySharedOrdering."""

    module: str
    data: dict[str, Any]

    @property
    def path(self) -> Path:
        """The trace file."""
        return (MODELS_DIR / str(self.data["path"])).resolve()

    @property
    def name(self) -> str:
        """The trace's file name."""
        return self.path.name

    @property
    def tier(self) -> str:
        """quick or deep."""
        return str(self.data["tier"])

    @property
    def expected(self) -> str:
        """'accepted', or 'rejected at seq N'."""
        if self.data["result"] == "accepted":
            return "accepted"
        return f"rejected at seq {self.data.get('firstUnfitSeq')}"


@dataclass
class Result:
    """A run of one manifest entry compared with what the manifest expects."""

    entry: ModelEntry | TraceEntry
    outcome: TlcOutcome | None = None
    verdict: TraceVerdict | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the run ended as the manifest says."""
        return not self.problems

    @property
    def got(self) -> str:
        """What happened, in the manifest's words."""
        if self.verdict is not None:
            if self.verdict.accepted:
                return "accepted"
            if self.verdict.accepted is None:
                return "undecided"
            seq = self.verdict.first_unfit["seq"] if self.verdict.first_unfit else "?"
            return f"rejected at seq {seq}"
        assert self.outcome is not None
        return self.outcome.failure


def load_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    """The manifest, validated against models/manifest.schema.json; every file it names must exist."""
    if not path.is_file():
        raise MissingInput(f"{path}: the models manifest does not exist")
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise UserError(f"{path}:{error.lineno}: field '(json)': {error.msg}") from None
    schema = json.loads(MANIFEST_SCHEMA.read_text(encoding="utf-8"))
    problem = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(schema).iter_errors(data))
    if problem is not None:
        place = ".".join(str(p) for p in problem.absolute_path) or "(manifest)"
        raise UserError(f"{path}: field '{place}': {problem.message}")
    for module in data["modules"]:
        names = [module["path"]] + [m["config"] for m in module["models"]] + [m["spec"] for m in module["models"]]
        names += [t["path"] for t in module.get("traces", [])]
        for name in names:
            if not (path.parent / name).is_file():
                raise MissingInput(f"{path}: field 'modules.{module['module']}': {name} does not exist")
        for model in module["models"]:
            _check_expectation(path, model)
    return data


def _check_expectation(path: Path, model: dict[str, Any]) -> None:
    where = f"{path}: field '{model['config']}'"
    if model["kind"] == "check" and model["result"] != "success":
        raise UserError(f"{where}: a 'check' configuration must expect success")
    if model["kind"] in ("broken", "permission") and model["result"] == "success":
        raise UserError(f"{where}: a '{model['kind']}' configuration must expect a failure")
    if model["result"] in ("safety failure", "liveness failure") and "property" not in model:
        raise UserError(f"{where}: a {model['result']} must name the property TLC reports")
    if "property" in model:
        config = path.parent / model["config"]
        listed = cfg_lists(config, ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES"))
        if model["property"] not in listed:
            raise UserError(f"{where}: property {model['property']} is not checked by {model['config']}")


def entries(
    data: dict[str, Any], names: Iterable[str] = (), deep: bool = False
) -> tuple[list[ModelEntry], list[TraceEntry]]:
    """The configurations and traces to run: the quick tier (and the deep one with deep=True),
    restricted to the named modules or configurations when names are given."""
    wanted = set(names)
    known = set()
    models: list[ModelEntry] = []
    traces: list[TraceEntry] = []
    for module in data["modules"]:
        known.add(module["module"])
        for model in module["models"]:
            entry = ModelEntry(module["module"], model)
            known.add(entry.name)
            if (deep or entry.tier == "quick") and (not wanted or wanted & {entry.module, entry.name}):
                models.append(entry)
        for trace in module.get("traces", []):
            tentry = TraceEntry(module["module"], trace)
            known.add(tentry.name)
            if (deep or tentry.tier == "quick") and (not wanted or wanted & {tentry.module, tentry.name}):
                traces.append(tentry)
    unknown = sorted(wanted - known)
    if unknown:
        raise UserError(f"unknown model or configuration {unknown[0]!r}: see models/manifest.json")
    return models, traces


def compare_model(entry: ModelEntry, outcome: TlcOutcome) -> list[str]:
    """Every way the outcome differs from what the manifest expects."""
    expected_result = entry.data["result"]
    expected_property = entry.data.get("property")
    violated = outcome.violated
    if outcome.result == "liveness failure" and violated is None:
        temporal = cfg_lists(entry.config, ("PROPERTY", "PROPERTIES"))
        violated = outcome.violated = temporal[0] if len(temporal) == 1 else None
    problems: list[str] = []
    if outcome.result != expected_result or (expected_property and violated != expected_property):
        problems.append(f"expected {entry.expected}, got {outcome.failure}")
    if outcome.errors and outcome.result in ("error", "timeout"):
        problems.append(outcome.errors[0].splitlines()[0])
    recorded = entry.data.get("distinctStates")
    if not problems and expected_result == "success" and recorded is not None:
        if outcome.distinct_states != recorded:
            problems.append(f"explored {outcome.distinct_states} distinct states, the manifest records {recorded}")
    return problems


def compare_trace(entry: TraceEntry, verdict: TraceVerdict) -> list[str]:
    """Every way a trace verdict differs from what the manifest expects."""
    if verdict.accepted is None:
        return [f"expected {entry.expected}, TLC did not decide: {verdict.problem}"]
    expected = entry.data
    if expected["result"] == "accepted":
        return [] if verdict.accepted else [f"expected accepted, got {verdict.summary}"]
    if verdict.accepted:
        return [f"expected rejection at seq {expected.get('firstUnfitSeq')}, but the trace was accepted"]
    problems = []
    seq = verdict.first_unfit["seq"] if verdict.first_unfit else None
    if "firstUnfitSeq" in expected and seq != expected["firstUnfitSeq"]:
        problems.append(f"expected rejection at seq {expected['firstUnfitSeq']}, got {verdict.summary}")
    if "reasons" in expected and sorted(expected["reasons"]) != verdict.reasons:
        problems.append(f"expected reasons {sorted(expected['reasons'])}, got {verdict.reasons}")
    return problems


Progress = Callable[[Result], None]


def run_entries(
    models: list[ModelEntry],
    traces: list[TraceEntry],
    java: Path,
    jar: Path,
    workers: int = 1,
    jobs: int = 1,
    timeout: float = 600.0,
    on_done: Progress | None = None,
) -> list[Result]:
    """Run every entry (up to `jobs` TLC processes at once), comparing each with the manifest."""

    def check_model(entry: ModelEntry) -> Result:
        run = TlcRun(
            entry.spec,
            entry.config,
            workers=workers,
            check_deadlock=bool(entry.data["checkDeadlock"]),
            coverage=bool(entry.data["coverage"]),
            timeout=timeout,
            short=entry.kind == "broken",  # a counterexample within seconds
        )
        outcome = run_tlc(run, java, jar)
        return Result(entry, outcome=outcome, problems=compare_model(entry, outcome))

    def check_trace(entry: TraceEntry) -> Result:
        try:
            verdict = validate_trace(entry.path, java, jar, timeout=timeout)
        except UserError as error:
            return Result(entry, problems=[str(error)])
        return Result(entry, outcome=verdict.outcome, verdict=verdict, problems=compare_trace(entry, verdict))

    tasks: list[Callable[[], Result]] = [lambda e=e: check_model(e) for e in models]  # type: ignore[misc]
    tasks += [lambda t=t: check_trace(t) for t in traces]  # type: ignore[misc]
    results: list[Result] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for result in pool.map(lambda task: task(), tasks):
            results.append(result)
            if on_done is not None:
                on_done(result)
    return results


def uncovered_actions(results: list[Result]) -> dict[str, list[str]]:
    """Per module, the actions that no coverage run of it ever took (TLC -coverage: 0 states)."""
    taken: dict[str, dict[str, int]] = {}
    for result in results:
        entry = result.entry
        if not isinstance(entry, ModelEntry) or not entry.data["coverage"] or result.outcome is None:
            continue
        counts = taken.setdefault(entry.module, {})
        for action, (_, total) in result.outcome.coverage.items():
            counts[action] = counts.get(action, 0) + total
    return {module: sorted(a for a, n in counts.items() if n == 0) for module, counts in taken.items()}


def runtime_text(seconds: float) -> str:
    """Seconds as HH:MM:SS, the manifest's runtime format."""
    whole = round(seconds)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def record(results: list[Result], path: Path = MANIFEST) -> int:
    """Write the figures of runs that ended as expected (a drifted state count included) into the manifest."""
    data = json.loads(path.read_text(encoding="utf-8"))
    by_config = {m["config"]: m for module in data["modules"] for m in module["models"]}
    by_trace = {t["path"]: t for module in data["modules"] for t in module.get("traces", [])}
    updated = 0
    for result in results:
        drift_only = all(problem.startswith("explored ") for problem in result.problems)
        if not drift_only or result.outcome is None:
            continue
        if isinstance(result.entry, ModelEntry):
            model = by_config[result.entry.data["config"]]
            model["runtime"] = runtime_text(result.outcome.seconds)
            if model["result"] == "success" and result.outcome.distinct_states:
                model["distinctStates"] = result.outcome.distinct_states
                model["totalStates"] = result.outcome.total_states
                if result.outcome.depth:
                    model["stateDepth"] = result.outcome.depth
        else:
            trace = by_trace[result.entry.data["path"]]
            trace["runtime"] = runtime_text(result.outcome.seconds)
            if result.verdict is not None:
                trace["events"] = result.verdict.events
        updated += 1
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    fd, temporary = tempfile.mkstemp(prefix=".manifest.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return updated
