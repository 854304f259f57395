"""Independence where it matters: the conformance kit never imports the reference, and the reference never
imports the kit (a checker that shares the reference's code would only ever agree with it).

Imports are read from the source (every `import` and `from ... import`, at any depth, so an import
inside a function counts too). The spec's configuration table (ks_spec.config) is checked against the
reference's own parser on many configurations, so the two readings of spec section 20 cannot drift.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ks_reference.config import Config, ConfigError
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
    st.sampled_from(["strict", "owner", "best-effort", "eventual", "ring", "any", "permits", "lookahead", "window"]),
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
    every_field = {"selector": "buckets", "read_bound": "lookahead"}  # the fields that apply only to some configs
    parsed = Config.parse(every_field).as_dict()
    assert {**CONFIG_DEFAULTS, **every_field} == parsed


@pytest.mark.parametrize(
    "package", ["spec/ks_spec", "reference/ks_reference", "conformance/ks_conformance", "spark/ks_spark"]
)
def test_no_module_imports_one_that_imports_it_back(package: str) -> None:
    """Issue 17: no import circle inside a package, counting imports inside functions too (a deferred import that
    only hides a circle from the interpreter still makes two modules impossible to read apart)."""
    folder = ROOT / package
    name = folder.name
    modules = {path.stem for path in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == name:
                parts = node.module.split(".")
                found = {parts[1]} if len(parts) > 1 else {alias.name for alias in node.names}
                targets |= found & modules
        graph[path.stem] = targets - {path.stem}
    circles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            module, trail = stack.pop()
            for target in sorted(graph[module]):
                if target == start:
                    circles.append(" -> ".join([*trail, target]))
                elif target not in seen:
                    seen.add(target)
                    stack.append((target, [*trail, target]))
    assert not circles, circles
