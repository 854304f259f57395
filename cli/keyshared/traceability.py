"""`keyshared spec trace KS-ID`: the chain from one requirement to everything that checks it.

The links are read where they are declared, so the chain cannot drift from them: the spec's text
(ks_spec.requirements), model properties named `KS_AREA_N_*` in models/*.tla with the configurations and
expected results of models/manifest.json and the mutants of models/mutants.json, the reference's
`# req:` comments, the checker's anomaly catalogue, the mutants' declared must/may sets and the vectors.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ks_spec import paths
from ks_spec.errors import UserError
from ks_spec.requirements import ID_RE, Requirement, parse_spec, read_retired

from keyshared import exit_codes

REFERENCE_DIR = paths.REPO_ROOT / "reference" / "ks_reference"
TESTS_DIR = paths.REPO_ROOT / "tests"
BATCH_MUTANTS = TESTS_DIR / "spark_support" / "dispatcher_mutants.py"
VECTORS_DIR = paths.SPEC_DIR / "vectors"
RULES_DIR = "conformance/ks_conformance/rules"

REQ_COMMENT_RE = re.compile(r"#\s*req:\s*(.*)$")
CITED_ID_RE = re.compile(r"\bKS-[A-Z]{2,4}-[1-9][0-9]*\b")
PROPERTY_SECTIONS = ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES")
STAGE_WORDS = {
    "event": "at each event",
    "op": "at the end of an op",
    "quiescent": "at quiescence",
    "harness": "by the harness",
}


@dataclass(frozen=True)
class Place:
    """A line of a file (path relative to the repository) and what it says."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Configuration:
    """A TLC configuration that lists a property, and how the manifest expects it to end."""

    config: str
    tier: str
    expect: str


@dataclass(frozen=True)
class ModelProperty:
    """A TLA+ definition named after the requirement, where it is defined and what runs it."""

    module: str
    name: str
    place: Place
    checks: str
    configurations: tuple[Configuration, ...]


@dataclass(frozen=True)
class ModelMutant:
    """A mutant of models/mutants.json that a property of the requirement must reject."""

    id: str
    property: str
    config: str
    bug: str


@dataclass(frozen=True)
class AnomalyCheck:
    """An anomaly kind of the checker's catalogue that judges the requirement."""

    name: str
    stage: str
    condition: str
    module: str
    """The file of the rule registry that defines it."""
    reported_at: tuple[str, ...] = ()
    """Where the checker reports it: `file:line function` of each `_report` naming it."""


@dataclass(frozen=True)
class DeclaredMutant:
    """A broken dispatcher whose declaration names the requirement: must fail, must warn, or may fail."""

    name: str
    role: str
    bug: str


@dataclass(frozen=True)
class VectorFile:
    """A vector of spec/vectors that targets the requirement: the kinds it exercises, the mutants that fail it."""

    path: str
    kinds: tuple[str, ...]
    caught: tuple[str, ...]


@dataclass
class Chain:
    """Everything `spec trace` prints for one requirement; `notes` says which links could not be read."""

    requirement: dict[str, Any]
    properties: list[ModelProperty] = field(default_factory=list)
    covered_by: list[str] = field(default_factory=list)
    model_note: str = ""
    model_mutants: list[ModelMutant] = field(default_factory=list)
    reference: list[Place] = field(default_factory=list)
    checks: list[AnomalyCheck] = field(default_factory=list)
    indirect: str = ""
    mutants: list[DeclaredMutant] = field(default_factory=list)
    batch_mutants: list[DeclaredMutant] = field(default_factory=list)
    vectors: list[VectorFile] | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The chain as plain JSON data (`vectors` is null while spec/vectors/ does not exist)."""
        data = asdict(self)
        data["reference"] = [{"path": p.path, "line": p.line, "text": p.text} for p in self.reference]
        return data


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(paths.REPO_ROOT))
    except ValueError:
        return str(path)


def find_requirement(text: str) -> Requirement:
    """The requirement an argument names (`KS-ORD-1`, `ks_ord_1`); a usage error when it names none."""
    wanted = text.strip().upper().replace("_", "-")
    if not ID_RE.match(wanted):
        raise UserError(f"{text}: not a requirement ID (expected KS-AREA-N, e.g. KS-ORD-1)", exit_codes.USAGE)
    for requirement in parse_spec():
        if requirement.id == wanted:
            return requirement
    retired = read_retired()
    if wanted in retired:
        raise UserError(f"{wanted}: retired ({retired[wanted]})", exit_codes.USAGE)
    raise UserError(f"{wanted}: no such requirement in spec/key-shared.md (keyshared spec list)", exit_codes.USAGE)


def reference_branches(requirement: str, folder: Path = REFERENCE_DIR) -> list[Place]:
    """Every line of the reference whose `# req:` comment cites the requirement."""
    found: list[Place] = []
    for path in sorted(folder.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = REQ_COMMENT_RE.search(line)
            if match and requirement in CITED_ID_RE.findall(match.group(1)):
                found.append(Place(_relative(path), number, line.strip()))
    return found


def _expectation(model: dict[str, Any], prop: str) -> str:
    """What the manifest expects of a configuration: pass, or (a broken variant) fail on this property."""
    if model.get("property") == prop:
        what = "a broken variant" if model["kind"] == "broken" else "a permission shown"
        return f"{what}: must end in {model['result']} of this property"
    return f"must end in {model['result']}"


def model_links(requirement: str, chain: Chain) -> None:
    """Fill the chain's model properties, their configurations, coverage notes and model mutants."""
    from ks_models import MODELS_DIR
    from ks_models.coverage import load_coverage_notes, module_properties
    from ks_models.manifest import load_manifest
    from ks_models.tlc import cfg_lists

    manifest = load_manifest()
    listed: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for module in manifest["modules"]:
        for model in module["models"]:
            config = MODELS_DIR / model["config"]
            for name in cfg_lists(config, PROPERTY_SECTIONS):
                listed.setdefault(f"{module['module']}.{name}", []).append((config.stem, model))
    prefix = requirement.replace("-", "_") + "_"
    for path in sorted(MODELS_DIR.glob("*.tla")):
        module = path.stem
        for prop in module_properties(module):
            if not prop.name.startswith(prefix):
                continue
            configurations = tuple(
                Configuration(config, model["tier"], _expectation(model, prop.name))
                for config, model in listed.get(f"{module}.{prop.name}", [])
                if model["kind"] == "check" or model.get("property") == prop.name
            )
            place = Place(_relative(path), prop.line, f"{prop.name} ==")
            chain.properties.append(ModelProperty(module, prop.name, place, prop.comment, configurations))
    notes = load_coverage_notes()
    covered = notes.get("covered_by", {}).get(requirement)
    if covered is not None:
        chain.covered_by = [str(prop) for prop in covered["by"]]
        chain.model_note = str(covered["why"])
    elif requirement in notes.get("not_modelled", {}):
        chain.model_note = str(notes["not_modelled"][requirement])
    mutants = json.loads((MODELS_DIR / "mutants.json").read_text(encoding="utf-8"))["mutants"]
    chain.model_mutants = [
        ModelMutant(m["id"], m["property"], m["config"], m["bug"]) for m in mutants if m["property"].startswith(prefix)
    ]


def _own_nodes(function: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of a function's body, leaving out those of the functions defined inside it (they count alone)."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


REPORTERS = frozenset({"_report", "harness_anomaly", "Anomaly"})
"""The calls that report an anomaly by name: the checker's, the harness's, and the suite's own anomalies."""


@cache
def report_sites() -> dict[str, list[str]]:
    """Per anomaly name, every place the kit reports it (`st._report("name", ...)`, `harness_anomaly(...)`,
    `Anomaly(...)`; an f-string name such as `f"holder-{what}-ignored"` matches each name it can form), as
    `file:line function`, read from the source of ks_conformance."""
    from ks_conformance.rules import RULES

    names = [rule.name for rule in RULES]
    sites: dict[str, list[str]] = {}
    kit = paths.REPO_ROOT / "conformance" / "ks_conformance"
    for path in sorted(kit.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in (node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)):
            for call in (node for node in _own_nodes(function) if isinstance(node, ast.Call)):
                called = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
                if called not in REPORTERS or not call.args:
                    continue
                place = f"{path.relative_to(paths.REPO_ROOT)}:{call.lineno} {function.name}"
                for name in _names_formed(call.args[0], names):
                    sites.setdefault(name, []).append(place)
    return sites


def _names_formed(argument: ast.expr, names: list[str]) -> list[str]:
    """The anomaly names an argument can be: a string literal, or an f-string's pattern matched against `names`."""
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return [argument.value] if argument.value in names else []
    if isinstance(argument, ast.JoinedStr):
        pattern = "".join(
            re.escape(str(part.value)) if isinstance(part, ast.Constant) else "[a-z]+" for part in argument.values
        )
        return [name for name in names if re.fullmatch(pattern, name)]
    return []


def checker_links(requirement: str, chain: Chain) -> None:
    """The registry's rules for the requirement, or why it has none of its own."""
    from ks_conformance import rules

    chain.checks = [
        AnomalyCheck(
            rule.name,
            STAGE_WORDS.get(rule.stage.value, rule.stage.value),
            rule.condition,
            f"{RULES_DIR}/{rule.module}.py",
            tuple(report_sites().get(rule.name, ())),
        )
        for rule in rules.rules_of(requirement)
    ]
    chain.indirect = rules.INDIRECT.get(requirement, "")


ROLES = ("must fail", "must warn", "may fail")


def _role(requirement: str, must: frozenset[str], warns: frozenset[str], may: frozenset[str]) -> str | None:
    if requirement in must:
        return "must fail"
    if requirement in warns:
        return "must warn"
    if requirement in may:
        return "may fail"
    return None


def conformance_mutants(requirement: str, tests_dir: Path = TESTS_DIR) -> list[DeclaredMutant]:
    """The mutants of tests/conformance_mutants whose `catches`, `warns` or `may` names the requirement.

    Imported (the double mutants' sets are computed from their parts); it needs tests/ on sys.path.
    """
    import importlib

    if str(tests_dir) not in sys.path:
        sys.path.insert(0, str(tests_dir))
    module = importlib.import_module("conformance_mutants")
    found = []
    for mutant in module.BY_NAME.values():
        role = _role(requirement, mutant.catches, mutant.warns, mutant.may)
        if role is not None:
            found.append(DeclaredMutant(mutant.name, role, mutant.bug))
    return sorted(found, key=lambda m: (ROLES.index(m.role), m.name))


def _constant_ids(node: ast.expr | None) -> frozenset[str]:
    """The IDs of `frozenset({"KS-..."})` or `frozenset("KS-... KS-...".split())` (string pieces joined)."""
    if node is None:
        return frozenset()
    strings = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return frozenset(CITED_ID_RE.findall(" ".join(strings)))


def batch_mutants(requirement: str, path: Path = BATCH_MUTANTS) -> list[DeclaredMutant]:
    """The `BatchMutant(...)` declarations of tests/spark_support/dispatcher_mutants.py, read without Spark."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docs = {
        node.name: (ast.get_docstring(node) or "").splitlines()[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and ast.get_docstring(node)
    }
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "BatchMutant"):
            continue
        if not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        catches = _constant_ids(node.args[1] if len(node.args) > 1 else keywords.get("catches"))
        may = _constant_ids(keywords.get("may"))
        role = _role(requirement, catches, frozenset(), may)
        if role is None:
            continue
        engine = node.args[2] if len(node.args) > 2 else keywords.get("engine")
        bug = docs.get(engine.id, "") if isinstance(engine, ast.Name) else ""
        found.append(DeclaredMutant(str(node.args[0].value), role, bug))
    return sorted(found, key=lambda m: (ROLES.index(m.role), m.name))


def vectors(requirement: str, folder: Path = VECTORS_DIR) -> list[VectorFile] | None:
    """The vectors (`*.vector.jsonl`) whose annotation targets the requirement; None while the folder is absent.

    Read from each file's header (spec/vectors/README.md), so that a vector being written cannot stop the trace.
    """
    if not folder.is_dir():
        return None
    found = []
    for path in sorted(folder.rglob("*.vector.jsonl")):
        try:
            header = json.loads(path.read_text(encoding="utf-8").split("\n", 1)[0])
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        note = header.get("vector") if isinstance(header, dict) else None
        if not isinstance(note, dict) or requirement not in note.get("targets", []):
            continue
        caught = tuple(str(c.get("mutant", "")) for c in note.get("caught", []) if isinstance(c, dict))
        found.append(VectorFile(_relative(path), tuple(str(k) for k in note.get("kinds", [])), caught))
    return found


def trace(text: str) -> Chain:
    """The whole chain for the requirement `text` names; a link that cannot be read becomes a note."""
    requirement = find_requirement(text)
    chain = Chain({**requirement.to_index(), "line": requirement.line})
    rid = requirement.id

    def add_mutants(rid: str, chain: Chain) -> None:
        chain.mutants = conformance_mutants(rid)

    def add_batch_mutants(rid: str, chain: Chain) -> None:
        chain.batch_mutants = batch_mutants(rid)

    links: tuple[tuple[str, Callable[[str, Chain], None]], ...] = (
        ("models", model_links),
        ("checker catalogue", checker_links),
        ("conformance mutants", add_mutants),
        ("batch mutants", add_batch_mutants),
    )
    for what, fill in links:
        try:
            fill(rid, chain)
        except (UserError, ImportError, OSError, KeyError, ValueError, SyntaxError) as error:
            chain.notes.append(f"{what}: could not be read ({type(error).__name__}: {error})")
    chain.reference = reference_branches(rid)
    chain.vectors = vectors(rid)
    return chain


def _wrapped(text: str, indent: str, width: int = 110, hanging: str | None = None) -> list[str]:
    import textwrap

    rest = hanging if hanging is not None else indent
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=rest) or [indent]


def render(chain: Chain) -> str:
    """The chain as text, one section per link, each saying where its facts were read."""
    req = chain.requirement
    lines = [
        f"{req['id']}  {req['level']}  {req['kind']}  profiles: {', '.join(req['profiles'])}",
        f"  {req['title']}",
        f"  spec/key-shared.md:{req['line']} (section {req['section']})",
        *_wrapped(req["text"], "  "),
        "",
        "models (models/*.tla, models/manifest.json)",
    ]
    for prop in chain.properties:
        lines.append(f"  {prop.module}.{prop.name}  {prop.place}")
        if prop.checks:
            lines += _wrapped(prop.checks, "    checks: ", hanging="    ")
        for conf in prop.configurations:
            lines.append(f"    {conf.config} ({conf.tier}): {conf.expect}")
        if not prop.configurations:
            lines.append("    no configuration of the manifest lists it")
    if chain.covered_by:
        lines.append(f"  covered by {', '.join(chain.covered_by)} (models/coverage.json)")
    if chain.model_note:
        lines += _wrapped(chain.model_note, "    ")
    if not chain.properties and not chain.covered_by and not chain.model_note:
        lines.append("  none")
    lines.append("model mutants (models/mutants.json)")
    lines += [f"  {m.id}: {m.property} in {m.config} must reject it" for m in chain.model_mutants] or ["  none"]
    lines.append("reference (# req: comments in reference/ks_reference)")
    lines += [f"  {place}  {place.text}" for place in chain.reference] or ["  none"]
    lines.append(f"checker rules ({RULES_DIR})")
    for check in chain.checks:
        lines.append(f"  {check.name} ({check.stage}, {check.module}): {check.condition}")
        lines += _wrapped(f"reported at {', '.join(check.reported_at) or '(no literal site)'}", "    ")
    if chain.indirect:
        lines += _wrapped(f"no check of its own: {chain.indirect}", "  ")
    if not chain.checks and not chain.indirect:
        lines.append("  none")
    lines.append("conformance mutants (tests/conformance_mutants: catches = must fail, warns = must warn, may)")
    lines += [f"  {m.role}: {m.name}" for m in chain.mutants] or ["  none"]
    lines.append("batch mutants (tests/spark_support/dispatcher_mutants.py: catches = must fail, may)")
    lines += [f"  {m.role}: {m.name}" for m in chain.batch_mutants] or ["  none"]
    lines.append("vectors (spec/vectors)")
    if chain.vectors is None:
        lines.append("  none yet (spec/vectors/ does not exist)")
    else:
        for vector in chain.vectors:
            lines.append(f"  {vector.path}: kinds {', '.join(vector.kinds) or '-'}")
            caught = ", ".join(vector.caught) or "no mutant known"
            lines.append(f"    fails for {caught}")
        if not chain.vectors:
            lines.append("  none")
    lines += [f"note: {note}" for note in chain.notes]
    return "\n".join(lines)
