"""The sample traces of spec/examples: well-formed ones must validate, malformed ones must not."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ks_spec import paths
from ks_spec.trace import validate_trace

EXAMPLES_DIR = paths.SPEC_DIR / "examples" / "traces"
PROBLEM_RE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): field '(?P<field>[^']+)': ")


def expected_rejections(folder: Path = EXAMPLES_DIR / "bad") -> dict[str, dict[str, object]]:
    """For each malformed sample, the line and field its rejection must name."""
    loaded: dict[str, dict[str, object]] = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    return loaded


def check_trace_examples(folder: Path = EXAMPLES_DIR) -> tuple[int, int, list[str]]:
    """Validate every sample; return (good accepted, bad rejected as expected, problems)."""
    problems: list[str] = []
    good = sorted((folder / "good").glob("*.jsonl"))
    for path in good:
        _, problem = validate_trace(path)
        if problem:
            problems.append(f"well-formed sample rejected: {problem}")
    expected = expected_rejections(folder / "bad")
    bad = sorted((folder / "bad").glob("*.jsonl"))
    if sorted(p.name for p in bad) != sorted(expected):
        problems.append("spec/examples/traces/bad/expected.json does not list exactly the malformed samples")
    for path in bad:
        _, problem = validate_trace(path)
        want = expected.get(path.name, {})
        match = PROBLEM_RE.match(problem or "")
        if match is None:
            problems.append(f"malformed sample accepted or unplaced: {path.name}: {problem}")
        elif int(match["line"]) != want.get("line") or match["field"] != want.get("field"):
            problems.append(
                f"{path.name}: rejected at line {match['line']} field {match['field']!r}, "
                f"expected line {want.get('line')} field {want.get('field')!r}"
            )
    return len(good), len(bad), problems
