"""Mutation testing of the models: plausible bugs injected into copies of the TLA+ actions.

`models/mutants.json` lists textual edits of the modules (find one exact text, replace it), each
with the quick configuration to run and the property that must reject it. The runner applies
each edit to a copy of models/ in a temporary folder, checks that one property alone on that
configuration (deadlock checking off, so only the property can reject), and counts the mutants
it rejects: a property is worth what it would catch if the model were wrong.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ks_spec.errors import MissingInput, UserError

from ks_models import MODELS_DIR
from ks_models.coverage import requirement_of
from ks_models.manifest import runtime_text
from ks_models.tlc import TlcOutcome, TlcRun, cfg_lists, run_tlc

MUTANTS = MODELS_DIR / "mutants.json"
PROPERTY_SECTIONS = ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES")
REQ_TAG_RE = re.compile(r"\\\* req: ([A-Z0-9, -]+)")


@dataclass(frozen=True)
class Mutant:
    """One textual edit of a module and the property that must reject it."""

    id: str
    module: str
    find: str
    replace: str
    config: str
    prop: str  # "property" in models/mutants.json
    bug: str

    @property
    def tla(self) -> str:
        """The file the edit applies to."""
        return f"{self.module}.tla"


@dataclass
class MutantResult:
    """A mutant's run: killed when TLC reports a failure of exactly the expected property."""

    mutant: Mutant
    outcome: TlcOutcome | None
    problem: str = ""

    @property
    def killed(self) -> bool:
        """True when the expected property rejected the mutant."""
        return not self.problem

    @property
    def status(self) -> str:
        """killed, survived, or what else happened."""
        if self.killed:
            return "killed"
        if self.outcome is not None and self.outcome.result == "success":
            return "survived"
        return "not killed"


def load_mutants(path: Path = MUTANTS, models_dir: Path = MODELS_DIR) -> list[Mutant]:
    """The mutants of path, each checked: its text occurs once, its config lists its property, and it
    does not edit a line that enforces the requirement its property checks (its own guard)."""
    if not path.is_file():
        raise MissingInput(f"{path}: the mutants manifest does not exist")
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise UserError(f"{path}:{error.lineno}: field '(json)': {error.msg}") from None
    mutants: list[Mutant] = []
    seen: set[str] = set()
    for index, raw in enumerate(data.get("mutants", [])):
        fields = ("id", "module", "find", "replace", "config", "property", "bug")
        missing = [name for name in fields if not isinstance(raw.get(name), str) or not raw[name]]
        if missing and not (missing == ["replace"] and raw.get("replace") == ""):
            raise UserError(f"{path}: field 'mutants.{index}.{missing[0]}': a non-empty string is required")
        mutant = Mutant(**{("prop" if name == "property" else name): raw[name] for name in fields})
        if mutant.id in seen:
            raise UserError(f"{path}: field 'mutants.{index}.id': {mutant.id} is used twice")
        seen.add(mutant.id)
        _check(path, models_dir, mutant)
        mutants.append(mutant)
    return mutants


def _check(path: Path, models_dir: Path, mutant: Mutant) -> None:
    where = f"{path}: mutant {mutant.id}"
    source = models_dir / mutant.tla
    config = models_dir / f"{mutant.config}.cfg"
    if not source.is_file() or not config.is_file():
        raise UserError(f"{where}: {mutant.tla} or {mutant.config}.cfg does not exist")
    text = source.read_text(encoding="utf-8")
    if text.count(mutant.find) != 1:
        raise UserError(f"{where}: its text occurs {text.count(mutant.find)} times in {mutant.tla}, not once")
    if mutant.prop not in cfg_lists(config, PROPERTY_SECTIONS):
        raise UserError(f"{where}: {mutant.config}.cfg does not check {mutant.prop}")
    requirement = requirement_of(mutant.prop)
    if requirement is not None and requirement in own_guard_requirements(text, mutant.find, mutant.replace):
        raise UserError(f"{where}: it edits a line that enforces {requirement}, the property's own guard")


def own_guard_requirements(text: str, find: str, replace: str) -> set[str]:
    """The requirements cited (`\\* req: ...`) on the lines of text that replacing find by replace changes."""
    prefix = 0
    while prefix < min(len(find), len(replace)) and find[prefix] == replace[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(find), len(replace)) - prefix and find[-1 - suffix] == replace[-1 - suffix]:
        suffix += 1
    start = text.index(find)
    changed_from, changed_to = start + prefix, start + len(find) - suffix
    first = text.rfind("\n", 0, changed_from) + 1
    last = text.find("\n", max(changed_to, changed_from))
    lines = text[first : last if last >= 0 else len(text)]
    cited: set[str] = set()
    for found in REQ_TAG_RE.finditer(lines):
        cited |= {part.strip() for part in found.group(1).split(",") if part.strip()}
    return cited


def single_property_config(config: Path, prop: str) -> str:
    """The .cfg text with every invariant and property removed except prop."""
    kept: list[str] = []
    section = ""
    for raw_line in config.read_text(encoding="utf-8").splitlines():
        line = raw_line.split("\\*", 1)[0].strip()
        head = line.partition(" ")[0]
        if head.isupper() and head.replace("_", "").isalpha():
            section = head
        if section in PROPERTY_SECTIONS:
            continue
        kept.append(raw_line)
    invariant = prop in cfg_lists(config, ("INVARIANT", "INVARIANTS"))
    kept.append(f"{'INVARIANT' if invariant else 'PROPERTY'} {prop}")
    return "\n".join(kept) + "\n"


def prepare(mutant: Mutant, folder: Path, models_dir: Path = MODELS_DIR) -> TlcRun:
    """Copy the modules into folder, apply the edit and write the one-property config; the run to make."""
    for module in models_dir.glob("*.tla"):
        shutil.copy(module, folder / module.name)
    target = folder / mutant.tla
    target.write_text(target.read_text(encoding="utf-8").replace(mutant.find, mutant.replace, 1), encoding="utf-8")
    config = folder / f"{mutant.config}.cfg"
    config.write_text(single_property_config(models_dir / f"{mutant.config}.cfg", mutant.prop), encoding="utf-8")
    spec = folder / _spec_of(models_dir / f"{mutant.config}.cfg")
    return TlcRun(spec, config, workers=1, check_deadlock=False)


def _spec_of(config: Path) -> str:
    """The module a config belongs to: MC<Module>.tla when it exists beside it, else <Module>.tla."""
    for module in ("KeySharedOrdering", "BucketHandoff", "CursorSafety"):
        if config.stem.startswith(f"MC{module}"):
            return f"MC{module}.tla"
        if config.stem.startswith(module):
            return f"{module}.tla"
    raise UserError(f"{config}: no module of the models matches this configuration")


def run_mutant(
    mutant: Mutant, java: Path, jar: Path, timeout: float = 300.0, models_dir: Path = MODELS_DIR
) -> MutantResult:
    """Apply one mutant to a temporary copy of the models and run TLC on its configuration."""
    with tempfile.TemporaryDirectory(prefix="keyshared-mutant-") as folder:
        run = prepare(mutant, Path(folder), models_dir)
        run = TlcRun(run.spec, run.config, workers=1, check_deadlock=False, timeout=timeout)
        outcome = run_tlc(run, java, jar)
    return MutantResult(mutant, outcome, _problem(mutant, outcome))


def _problem(mutant: Mutant, outcome: TlcOutcome) -> str:
    if outcome.result == "success":
        return f"survived: {mutant.prop} holds on {mutant.config} with the mutant"
    if outcome.result in ("safety failure", "liveness failure"):
        violated = outcome.violated or (mutant.prop if outcome.result == "liveness failure" else None)
        if violated == mutant.prop:
            return ""
        return f"{outcome.failure}, not a failure of {mutant.prop}"
    detail = f": {outcome.errors[0].splitlines()[0]}" if outcome.errors else ""
    return f"{outcome.result}{detail}"


def run_mutants(
    mutants: list[Mutant],
    java: Path,
    jar: Path,
    jobs: int = 1,
    timeout: float = 300.0,
    on_done: Callable[[MutantResult], None] | None = None,
) -> list[MutantResult]:
    """Run every mutant (up to jobs TLC processes at once), in the order given."""
    results: list[MutantResult] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for result in pool.map(lambda m: run_mutant(m, java, jar, timeout), mutants):
            results.append(result)
            if on_done is not None:
                on_done(result)
    return results


def select(mutants: list[Mutant], names: list[str]) -> list[Mutant]:
    """The mutants whose id, module, config or property is among names (all when names is empty)."""
    if not names:
        return mutants
    wanted = set(names)
    chosen = [m for m in mutants if wanted & {m.id, m.module, m.config, m.prop}]
    if not chosen:
        raise UserError(f"no mutant matches {sorted(wanted)[0]!r}: see models/mutants.json")
    return chosen


def score_text(results: list[MutantResult]) -> str:
    """'mutation score: 12/12 (100%)'."""
    killed = sum(1 for r in results if r.killed)
    percent = 100.0 * killed / len(results) if results else 0.0
    return f"mutation score: {killed}/{len(results)} ({percent:.0f}%)"


def record(results: list[MutantResult], seconds: float, jobs: int, path: Path = MUTANTS) -> None:
    """Write the score and runtime of a run of every mutant into models/mutants.json (for the README)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    killed = sum(1 for r in results if r.killed)
    data["recorded"] = {"killed": killed, "total": len(results), "runtime": runtime_text(seconds), "jobs": jobs}
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def mutants_per_property(mutants: list[Mutant]) -> dict[str, int]:
    """Module.Property -> how many mutants must be rejected by it."""
    counts: dict[str, int] = {}
    for mutant in mutants:
        name = f"{_module_of(mutant.config)}.{mutant.prop}"
        counts[name] = counts.get(name, 0) + 1
    return counts


def _module_of(config: str) -> str:
    return _spec_of(Path(f"{config}.cfg")).removesuffix(".tla").removeprefix("MC")
