"""Judge recorded trace files: validate each event (trace format v1) and feed it to the checker.

A malformed trace cannot be judged: its verdict is unknown, with the first problem as
`file:line: field 'x': problem`. Traces are streamed, never loaded whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ks_spec.errors import MissingInput, UserError
from ks_spec.trace import SequenceRules, read_events, schema_problem

from ks_conformance.anomalies import Anomaly, Verdict
from ks_conformance.checker import Checker, Problem


@dataclass
class TraceCheck:
    """The result of checking one trace file."""

    path: Path
    events: int = 0
    verdict: Verdict = Verdict.UNKNOWN
    anomalies: list[Anomaly] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    malformed: str | None = None
    exercised: dict[str, int] = field(default_factory=dict)
    config: dict[str, object] = field(default_factory=dict)

    @property
    def warnings(self) -> list[Anomaly]:
        """Anomalies of SHOULD requirements."""
        return [a for a in self.anomalies if a.level != "MUST"]


def check_trace(path: Path) -> TraceCheck:
    """Check one trace file or folder; raise MissingInput if it does not exist."""
    if not path.exists():
        raise MissingInput(f"{path}: no such file or folder")
    result = TraceCheck(path)
    checker = Checker()
    rules = SequenceRules()
    try:
        for where, event in read_events(path):
            problem = schema_problem(event) or rules.check(event)
            if problem:
                result.malformed = f"{where}: {problem}"
                break
            checker.feed(event)
            result.events += 1
    except UserError as error:
        result.malformed = str(error)
    if result.events == 0 and result.malformed is None:
        result.malformed = f"{path}: the trace is empty (it needs at least a 'config' event)"
    checker.finish()
    result.anomalies = list(checker.anomalies)
    result.problems = list(checker.problems)
    result.exercised = {name: count for name, count in checker.exercised.items() if checker.applies(name)}
    result.config = dict(checker.config)
    result.verdict = checker.verdict
    if result.malformed is not None and result.verdict is Verdict.VALID:
        result.verdict = Verdict.UNKNOWN
    return result
