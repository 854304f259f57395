"""Independence where it matters: the conformance kit never imports the reference, and the reference never
imports the kit (a checker that shares the reference's code would only ever agree with it).

Imports are read from the source (every `import` and `from ... import`, at any depth, so an import
inside a function counts too). The spec's configuration table (ks_spec.config) is checked against the
reference's own parser on many configurations, so the two readings of spec section 20 cannot drift.

Read the same way over every package and folder (the six packages, tests/ and benchmarks/): no import circle, and
the layering of issue 30 (no package imports the CLI; ks_spark's validation, dispatcher and capture parts meet only
in its shared base).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ks_reference.config import OPTIONS_RECORDED_WHEN_SET, Config, ConfigError
from ks_spec.config import BY_NAME, CONFIG_DEFAULTS, config_problem

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "conformance/ks_conformance": ("ks_reference", "ks_spark"),
    "reference/ks_reference": ("ks_conformance", "ks_spark"),
    "spec/ks_spec": ("ks_reference", "ks_conformance", "ks_spark", "ks_models"),
}


def imported_modules(path: Path) -> set[str]:
    """Every module a Python file imports, wherever the import statement is."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_forbidden_imports(package: str) -> None:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in imported_modules(path):
            if module.split(".")[0] in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not bad, "; ".join(bad)


def test_the_scan_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from ks_reference.config import Config\n", encoding="utf-8")
    assert "ks_reference.config" in imported_modules(source)


VALUES = st.one_of(
    st.integers(-2, 12),
    st.booleans(),
    st.sampled_from(
        ["strict", "owner", "best-effort", "eventual", "ring", "any", "permits", "lookahead", "window", "heartbeat"]
    ),
)
FIELD_NAMES = st.sampled_from([*BY_NAME, "colour"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(FIELD_NAMES, VALUES, max_size=4))
def test_the_spec_table_refuses_exactly_what_the_reference_refuses(config: dict[str, object]) -> None:
    problem = config_problem(config)
    try:
        Config.parse(config)
    except ConfigError as error:
        assert problem is not None, f"the reference refuses {config} ({error}), the spec table accepts it"
        # with several bad fields either may be named first; a relation may name a field left at its default
        assert problem[0] in config or problem[0] == error.field
    else:
        assert problem is None, f"the spec table refuses {config} ({problem}), the reference accepts it"


def test_the_spec_defaults_are_the_reference_defaults() -> None:
    # the fields that apply only to some configurations: each selector's own, and the look-ahead's
    for selector in ("buckets", "partitions"):
        some_fields = {"selector": selector, "read_bound": "lookahead"}
        everything = {**CONFIG_DEFAULTS, **some_fields}
        expected = {name: value for name, value in everything.items() if BY_NAME[name].only_selector in ("", selector)}
        for name, default in OPTIONS_RECORDED_WHEN_SET.items():  # left out of a trace at their default
            assert getattr(Config.parse(some_fields), name) == expected.pop(name, default) == default
        assert Config.parse(some_fields).as_dict() == expected
    # the heartbeat options are recorded when set: a trace without them is judged at their defaults
    heartbeat = {"read_trigger": "heartbeat", "timer_slack": 1}
    assert Config.parse(heartbeat).as_dict().items() >= heartbeat.items()
    assert all(CONFIG_DEFAULTS[name] == getattr(Config(), name) for name in OPTIONS_RECORDED_WHEN_SET)


SCOPES = {
    "cli/keyshared": "cli",
    "spec/ks_spec": "spec",
    "models/ks_models": "models",
    "reference/ks_reference": "reference",
    "conformance/ks_conformance": "conformance",
    "spark/ks_spark": "spark",
    "tests": "tests",
    "benchmarks": ".",
}
"""Every package and folder of Python code, each with the folder its import names are relative to: the six packages
(under their source folders), tests/ (its test modules and helper packages, importable because pytest puts tests/ on
the path) and benchmarks/ (run from the repository root)."""


def module_name(path: Path, source_root: Path) -> str:
    """The dotted name a file is imported as (`ks_spark.validation.validator`, `spark_support`)."""
    parts = path.relative_to(source_root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_files(folder: Path, source_root: Path) -> dict[str, Path]:
    """Every module under `folder`, by dotted name."""
    return {module_name(path, source_root): path for path in sorted(folder.rglob("*.py"))}


def import_graph(folder: Path, source_root: Path) -> dict[str, set[str]]:
    """Which modules of `folder` each of its modules imports, at any depth (inside functions too), absolute or
    relative, `from package import module` included. Importing a module is an edge to it alone, not to the packages
    around it (their `__init__` files only say what the package is)."""
    files = module_files(folder, source_root)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            wanted: list[str] = []
            if isinstance(node, ast.Import):
                wanted = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                    base = ".".join([*anchor, *([base] if base else [])])
                wanted = [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
            for dotted in wanted:
                parts = dotted.split(".")
                found = next(
                    (".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in files), None
                )
                if found is not None and found != name:
                    targets.add(found)
        graph[name] = targets
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[str]:
    """One circle (`a -> b -> a`) through each module that lies on one."""
    circles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], {start}
        while stack:
            module, trail = stack.pop()
            if start in graph[module]:
                circles.append(" -> ".join([*trail, start]))
                break
            for target in sorted(graph[module] - seen):
                seen.add(target)
                stack.append((target, [*trail, target]))
    return circles


@pytest.mark.parametrize("folder", sorted(SCOPES))
def test_no_module_imports_one_that_imports_it_back(folder: str) -> None:
    """Issues 17 and 30: no import circle in any package or folder (subpackages included), counting imports inside
    functions too (a deferred import that only hides a circle from the interpreter still makes two modules
    impossible to read apart)."""
    circles = import_circles(import_graph(ROOT / folder, ROOT / SCOPES[folder]))
    assert not circles, circles


def test_the_circle_scan_sees_a_circle_through_a_subpackage_a_function_and_a_relative_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "sub" / "__init__.py").write_text("", encoding="utf-8")
    (package / "a.py").write_text("def f():\n    from pkg.sub import b\n", encoding="utf-8")
    (package / "sub" / "b.py").write_text("from .. import a\n", encoding="utf-8")
    (package / "c.py").write_text("import pkg.a\n", encoding="utf-8")  # imports into the circle, not on it
    assert import_circles(import_graph(package, tmp_path)) == [
        "pkg.a -> pkg.sub.b -> pkg.a",
        "pkg.sub.b -> pkg.a -> pkg.sub.b",
    ]


def test_the_circle_scan_sees_a_circle_between_a_flat_module_and_a_helper_package(tmp_path: Path) -> None:
    """The shape of tests/ and benchmarks/: top-level modules beside helper packages."""
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("import test_x\n", encoding="utf-8")
    (tmp_path / "test_x.py").write_text("from helpers import thing\n", encoding="utf-8")
    assert import_circles(import_graph(tmp_path, tmp_path)) == [
        "helpers -> test_x -> helpers",
        "test_x -> helpers -> test_x",
    ]


PACKAGES = [folder for folder in SCOPES if "/" in folder]
SPARK_PARTS = ("validation", "dispatcher", "capture")


def layering_violations(folder: Path, source_root: Path) -> list[str]:
    """What breaks the layering below in one package folder: an import of the CLI (`keyshared`) from outside it, and
    in ks_spark an import across its parts (a ks_spark module outside the three parts is the shared base)."""

    def part(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in SPARK_PARTS else "base"

    bad = []
    for name, path in module_files(folder, source_root).items():
        if name.split(".")[0] != "keyshared":
            bad += [
                f"{name} imports {module}" for module in imported_modules(path) if module.split(".")[0] == "keyshared"
            ]
    for name, targets in import_graph(folder, source_root).items():
        if name.split(".")[0] == "ks_spark":
            crossing = [target for target in targets if part(target) not in {"base", part(name)}]
            bad += [f"{name} ({part(name)}) imports {target} ({part(target)})" for target in crossing]
    return sorted(bad)


@pytest.mark.parametrize("package", PACKAGES)
def test_the_layers(package: str) -> None:
    """Issue 30, the layering: the CLI (`keyshared`) may import any package, and no package imports the CLI (the
    Java check both need lives in ks_spec.java; spark-submit's entry file is keyshared/submit.py). Inside ks_spark,
    the three parts (`validation`, `dispatcher`, `capture`) never import each other: each imports itself and the
    shared base (ks_spark's top-level modules: session, progress, schema), and the base imports none of the parts.
    Imports inside functions and under TYPE_CHECKING count."""
    violations = layering_violations(ROOT / package, ROOT / SCOPES[package])
    assert not violations, violations


def test_the_layering_scan_sees_a_planted_violation(tmp_path: Path) -> None:
    spark = tmp_path / "ks_spark"
    for part in ("", "validation", "capture"):
        (spark / part).mkdir(exist_ok=True)
        (spark / part / "__init__.py").write_text("", encoding="utf-8")
    (spark / "session.py").write_text("def f():\n    from ks_spark.capture import watch\n", encoding="utf-8")
    (spark / "validation" / "v.py").write_text(
        "from ks_spark import session\nfrom ks_spark.capture import watch\n", encoding="utf-8"
    )
    (spark / "capture" / "watch.py").write_text(
        "from ks_spark.session import f\nfrom keyshared.cli import main\n", encoding="utf-8"
    )
    assert layering_violations(spark, tmp_path) == [
        "ks_spark.capture.watch imports keyshared.cli",
        "ks_spark.session (base) imports ks_spark.capture.watch (capture)",
        "ks_spark.validation.v (validation) imports ks_spark.capture.watch (capture)",
    ]
