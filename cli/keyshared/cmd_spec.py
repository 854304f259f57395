"""`keyshared spec`: check the specification and regenerate its requirement index."""

from __future__ import annotations

import argparse
from typing import Any

from keyshared.ui import console, table


def register(commands: Any) -> None:
    """Add `spec check`, `spec index`, `spec list` and `spec trace`."""
    spec = commands.add_parser("spec", help="check the spec, regenerate requirements.json, list requirements")
    actions = spec.add_subparsers(title="actions", metavar="ACTION", parser_class=type(spec))
    actions.required = True
    check = actions.add_parser("check", help="IDs well formed and unique, citations exist, index fresh")
    check.set_defaults(handler=run_check)
    index = actions.add_parser(
        "index",
        help="regenerate spec/requirements.json from key-shared.md and checking.md's anomaly tables from the rules",
    )
    index.set_defaults(handler=run_index)
    listing = actions.add_parser("list", help="print the requirements as a table")
    listing.add_argument("--area", help="only this area (e.g. ORD)")
    listing.set_defaults(handler=run_list)
    trace = actions.add_parser(
        "trace", help="one requirement's chain: spec text, model properties, reference, checker, mutants, vectors"
    )
    trace.add_argument("requirement", metavar="KS-ID", help="a requirement ID, e.g. KS-ORD-1")
    trace.add_argument("--json", action="store_true", help="print the chain as one JSON document")
    trace.set_defaults(handler=run_trace)


def run_check(args: argparse.Namespace) -> int:
    """Print every problem with the spec; exit 1 if there is any."""
    from ks_spec.requirements import check_spec

    requirements, problems = check_spec()
    problems += stale_tables()
    for problem in problems:
        console.print(f"[red]problem[/red] {problem}", highlight=False)
    if problems:
        return 1
    console.print(f"spec ok: {len(requirements)} requirements, every cited ID defined, index fresh")
    return 0


def stale_tables() -> list[str]:
    """A problem if checking.md's anomaly tables are not the rule registry's (ks_conformance.rules)."""
    from ks_conformance.rules.tables import render
    from ks_spec import paths

    document = (paths.SPEC_DIR / "checking.md").read_text(encoding="utf-8")
    if render(document) != document:
        return ["spec/checking.md: the anomaly tables of section 2 differ from the rules (run `keyshared spec index`)"]
    return []


def run_index(args: argparse.Namespace) -> int:
    """Write spec/requirements.json and checking.md's anomaly tables, each atomically."""
    from ks_spec import paths
    from ks_spec.requirements import check_ids, parse_spec, read_retired, render_index
    from ks_spec.trace import _atomic_target

    requirements = parse_spec()
    problems = check_ids(requirements, read_retired())
    if problems:
        for problem in problems:
            console.print(f"[red]problem[/red] {problem}", highlight=False)
        return 1
    import os

    fd, temporary = _atomic_target(paths.REQUIREMENTS_INDEX)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(render_index(requirements))
    os.replace(temporary, paths.REQUIREMENTS_INDEX)
    console.print(f"wrote {paths.REQUIREMENTS_INDEX} ({len(requirements)} requirements)")
    from ks_conformance.rules import RULES
    from ks_conformance.rules.tables import render

    checking = paths.SPEC_DIR / "checking.md"
    rendered = render(checking.read_text(encoding="utf-8"))
    fd, temporary = _atomic_target(checking)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(rendered)
    os.replace(temporary, checking)
    console.print(f"wrote {checking}'s anomaly tables ({len(RULES)} rules)")
    return 0


def run_list(args: argparse.Namespace) -> int:
    """Print ID, level, profiles, kind and title of each requirement."""
    from ks_spec.requirements import parse_spec

    rows = [
        (r.id, r.level, ", ".join(r.profiles), r.kind, r.title)
        for r in parse_spec()
        if args.area is None or r.area == args.area.upper()
    ]
    console.print(table("requirements", ("id", "level", "profiles", "kind", "title"), rows))
    return 0


def run_trace(args: argparse.Namespace) -> int:
    """Print where one requirement is stated, modelled, implemented, checked, mutated and replayed."""
    import json

    from keyshared.traceability import render, trace

    chain = trace(args.requirement)
    print(json.dumps(chain.to_json(), indent=2) if args.json else render(chain))
    return 0
