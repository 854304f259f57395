"""Which requirement each model property checks, and the generated tables of models/README.md.

A property named `KS_ORD_1_...` checks KS-ORD-1. Every MUST requirement of kind safety (and the
MUST liveness ones) must be checked by such a property in a configuration the manifest expects
to pass, be listed in models/coverage.json as covered by a property named after another
requirement, or be listed there as "not modelled, because ...".
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ks_spec.errors import UserError
from ks_spec.requirements import Requirement, parse_spec

from ks_models import COVERAGE, MODELS_DIR, README
from ks_models.manifest import load_manifest
from ks_models.tlc import cfg_lists
from ks_models.traces import SKIPPED_EVENTS

PROPERTY_RE = re.compile(r"^(KS_[A-Z]{2,4}_[1-9][0-9]*)_[A-Za-z]+$")
CHECKED_KINDS = ("safety", "liveness")
SECTIONS = ("requirements", "properties", "configurations", "failures", "mutants", "traces", "skipped-events")
MODULES = ("KeySharedOrdering", "CursorSafety", "BucketHandoff")
DEFINITION_RE = re.compile(r"^(KS_[A-Z]{2,4}_[1-9][0-9]*_[A-Za-z]+) ==(.*)$")


@dataclass(frozen=True)
class Coverage:
    """How one requirement is covered by the models."""

    requirement: Requirement
    properties: tuple[str, ...]  # "Module.Property" that check it by name
    covered_by: tuple[str, ...]  # "Module.Property" named after another requirement that check it
    why: str  # the note of coverage.json (covered_by or not_modelled), or ""

    @property
    def modelled(self) -> bool:
        """True when some property checks the requirement."""
        return bool(self.properties or self.covered_by)


def requirement_of(prop: str) -> str | None:
    """KS-ORD-1 for KS_ORD_1_FirstDeliveryOrder; None for names that cite no requirement."""
    found = PROPERTY_RE.match(prop)
    return found.group(1).replace("_", "-") if found else None


def checked_properties(manifest: dict[str, Any]) -> dict[str, set[str]]:
    """Module.Property -> the configurations that check it and must pass."""
    checked: dict[str, set[str]] = {}
    for module in manifest["modules"]:
        for model in module["models"]:
            if model["kind"] != "check":
                continue
            config = MODELS_DIR / model["config"]
            for name in cfg_lists(config, ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES")):
                if requirement_of(name):
                    checked.setdefault(f"{module['module']}.{name}", set()).add(config.stem)
    return checked


def load_coverage_notes(path: Path = COVERAGE) -> dict[str, Any]:
    """models/coverage.json: {"covered_by": {ID: {"by": [...], "why": ...}}, "not_modelled": {ID: why}}."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def requirement_coverage(
    manifest: dict[str, Any] | None = None, notes: dict[str, Any] | None = None
) -> tuple[list[Coverage], list[str]]:
    """Coverage of every MUST safety or liveness requirement, and the problems found."""
    manifest = manifest if manifest is not None else load_manifest()
    notes = notes if notes is not None else load_coverage_notes()
    requirements = {req.id: req for req in parse_spec()}
    checked = checked_properties(manifest)
    by_requirement: dict[str, list[str]] = {}
    for prop in sorted(checked):
        req_id = requirement_of(prop.split(".", 1)[1])
        assert req_id is not None
        by_requirement.setdefault(req_id, []).append(prop)
    problems: list[str] = []
    for req_id in sorted(set(notes.get("covered_by", {})) | set(notes.get("not_modelled", {}))):
        if req_id not in requirements:
            problems.append(f"coverage.json: {req_id} is not a requirement of spec/key-shared.md")
    for req_id in sorted(set(by_requirement)):
        if req_id not in requirements:
            problems.append(f"property {by_requirement[req_id][0]} names {req_id}, which the spec does not define")
    rows: list[Coverage] = []
    for req in requirements.values():
        if req.level != "MUST" or req.kind not in CHECKED_KINDS:
            continue
        props = tuple(by_requirement.get(req.id, ()))
        covered = notes.get("covered_by", {}).get(req.id)
        reason = notes.get("not_modelled", {}).get(req.id)
        by: tuple[str, ...] = ()
        why = ""
        if covered is not None:
            by = tuple(covered["by"])
            why = str(covered["why"])
            for prop in by:
                if prop not in checked:
                    problems.append(
                        f"coverage.json: {req.id} is covered by {prop}, which no passing configuration checks"
                    )
        if reason is not None:
            why = str(reason)
            if props or by:
                problems.append(f"coverage.json: {req.id} is listed as not modelled but {(props + by)[0]} checks it")
        if not props and not by and reason is None:
            problems.append(f"{req.id} ({req.kind}) has no model property and no 'not modelled, because' entry")
        rows.append(Coverage(req, props, by, why))
    return rows, problems


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_requirements(rows: list[Coverage]) -> str:
    """The requirement coverage table."""
    lines = ["| requirement | kind | checked by | note |", "|---|---|---|---|"]
    for row in rows:
        names = [f"`{p.split('.', 1)[1]}` ({p.split('.', 1)[0]})" for p in row.properties + row.covered_by]
        checked_by = ", ".join(names) if names else "not modelled"
        title = f"[{row.requirement.id}](../spec/key-shared.md#{row.requirement.id}) {row.requirement.title}"
        lines.append(f"| {_cell(title)} | {row.requirement.kind} | {_cell(checked_by)} | {_cell(row.why)} |")
    return "\n".join(lines)


class PropertyDefinition(NamedTuple):
    """A requirement-named property as a module defines it (`KS_AREA_N_Name == ...`)."""

    name: str
    kind: str
    """invariant, action or liveness."""
    comment: str
    """The comment lines above the definition, joined: what it checks, in words."""
    line: int
    """The line of the definition (from 1)."""


def module_properties(module: str, models_dir: Path = MODELS_DIR) -> list[PropertyDefinition]:
    """Each requirement-named property of a module, in the order the module defines them."""
    lines = (models_dir / f"{module}.tla").read_text(encoding="utf-8").splitlines()
    found: list[PropertyDefinition] = []
    for index, line in enumerate(lines):
        match = DEFINITION_RE.match(line)
        if not match:
            continue
        comment: list[str] = []
        above = index - 1
        while above >= 0 and lines[above].startswith("\\*"):
            comment.insert(0, lines[above][2:].strip())
            above -= 1
        body = (match.group(2) + " " + (lines[index + 1] if index + 1 < len(lines) else "")).strip()
        kind = "liveness" if body.startswith("<>") else "action" if body.startswith("[]") else "invariant"
        found.append(PropertyDefinition(match.group(1), kind, " ".join(comment), index + 1))
    return found


def render_properties() -> str:
    """Every property of the three modules, its kind and, in words, what it checks (its comment)."""
    lines = ["| module | property | kind | what it checks |", "|---|---|---|---|"]
    for module in MODULES:
        for prop in module_properties(module):
            lines.append(f"| {module} | `{prop.name}` | {prop.kind} | {_cell(prop.comment)} |")
    return "\n".join(lines)


def render_mutants(path: Path = MODELS_DIR / "mutants.json") -> str:
    """The mutants of models/mutants.json with the property that must reject each, and the last score."""
    data = json.loads(path.read_text(encoding="utf-8"))
    lines = ["| mutant | configuration | must reject | the bug |", "|---|---|---|---|"]
    for mutant in data["mutants"]:
        lines.append(f"| `{mutant['id']}` | `{mutant['config']}` | `{mutant['property']}` | {_cell(mutant['bug'])} |")
    recorded = data.get("recorded")
    if recorded:
        lines.append("")
        lines.append(
            f"Last recorded run: mutation score {recorded['killed']}/{recorded['total']} "
            f"({100 * recorded['killed'] // max(1, recorded['total'])}%), {recorded['runtime']} with "
            f"{recorded['jobs']} TLC {'run' if recorded['jobs'] == 1 else 'runs'} at a time."
        )
    return "\n".join(lines)


def render_configurations(manifest: dict[str, Any]) -> str:
    """Every configuration with its expected result and recorded figures."""
    lines = [
        "| module | configuration | tier | kind | expected | distinct states | depth | runtime |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for module in manifest["modules"]:
        for model in module["models"]:
            expected = model["result"] + (f" on `{model['property']}`" if "property" in model else "")
            states = f"{model['distinctStates']:,}" if "distinctStates" in model else ""
            lines.append(
                f"| {module['module']} | [`{Path(model['config']).stem}`]({model['config']}) | {model['tier']} "
                f"| {model['kind']} | {expected} | {states} | {model.get('stateDepth', '')} "
                f"| {model.get('runtime', '')} |"
            )
    return "\n".join(lines)


def render_failures(manifest: dict[str, Any]) -> str:
    """What the counterexample of each broken variant (and permission) shows."""
    lines = ["| configuration | TLC reports | what the counterexample shows |", "|---|---|---|"]
    for module in manifest["modules"]:
        for model in module["models"]:
            if model["kind"] == "check":
                continue
            reported = f"{model['result']} on `{model['property']}`"
            lines.append(f"| `{Path(model['config']).stem}` | {reported} | {_cell(model.get('shows', ''))} |")
    return "\n".join(lines)


def render_traces(manifest: dict[str, Any]) -> str:
    """The traces validated against KeySharedOrdering and their expected verdicts."""
    lines = ["| trace | events | expected | what it shows | runtime |", "|---|---|---|---|---|"]
    for module in manifest["modules"]:
        for trace in module.get("traces", []):
            expected = trace["result"]
            if expected == "rejected":
                reasons = ", ".join(trace.get("reasons", []))
                expected = f"rejected at seq {trace.get('firstUnfitSeq')} ({reasons})"
            lines.append(
                f"| [`{Path(trace['path']).name}`]({trace['path']}) | {trace.get('events', '')} | {expected} "
                f"| {_cell(trace.get('shows', ''))} | {trace.get('runtime', '')} |"
            )
    return "\n".join(lines)


def render_skipped() -> str:
    """The trace events KeySharedOrdering replays as no-ops, and why."""
    lines = ["| event | why the model skips it |", "|---|---|"]
    lines += [f"| `{kind}` | {why} |" for kind, why in SKIPPED_EVENTS.items()]
    return "\n".join(lines)


def render_sections(manifest: dict[str, Any] | None = None) -> dict[str, str]:
    """Every generated section of models/README.md, by name."""
    manifest = manifest if manifest is not None else load_manifest()
    rows, _ = requirement_coverage(manifest)
    return {
        "requirements": render_requirements(rows),
        "properties": render_properties(),
        "configurations": render_configurations(manifest),
        "failures": render_failures(manifest),
        "mutants": render_mutants(),
        "traces": render_traces(manifest),
        "skipped-events": render_skipped(),
    }


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- generated: {name} (keyshared model-check --readme); do not edit -->",
        f"<!-- end of generated: {name} -->",
    )


def readme_with_sections(text: str, sections: dict[str, str]) -> str:
    """The README text with each generated section replaced by its fresh content."""
    for name, content in sections.items():
        begin, end = _markers(name)
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(text):
            raise UserError(f"{README}: the markers of the generated section '{name}' are missing")
        replacement = f"{begin}\n{content}\n{end}"
        text = pattern.sub(replacement.replace("\\", "\\\\"), text)  # a literal replacement
    return text


def stale_sections(path: Path = README) -> list[str]:
    """The generated sections of the README that differ from what the manifest says now."""
    text = path.read_text(encoding="utf-8")
    sections = render_sections()
    fresh = readme_with_sections(text, sections)
    if fresh == text:
        return []
    return [name for name in SECTIONS if readme_with_sections(text, {name: sections[name]}) != text]


def update_readme(path: Path = README) -> bool:
    """Rewrite the generated sections of models/README.md; True when something changed."""
    text = path.read_text(encoding="utf-8")
    fresh = readme_with_sections(text, render_sections())
    if fresh == text:
        return False
    fd, temporary = tempfile.mkstemp(prefix=".README.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(fresh)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True
