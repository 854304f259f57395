"""The pytest plugin: run the conformance suite from a broker team's own test suite.

Installed with keyshared (entry point `pytest11`), it adds two ways in:

* `pytest --keyshared-adapter ADAPTER` adds one test item per requirement of the spec: a requirement
  the run shows violated fails with its witnesses explained, one the implementation cannot be tested
  on (skipped, untested, vacuous) is skipped with the reason, a SHOULD violation passes with a warning.
  An adapter that does not start, or faults, fails every item with that error.
* the `keyshared_suite` fixture, a function `(adapter, profile="ci", seed=0) -> RunResult`, for a team
  that prefers to write its own assertions.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

OPTION_ADAPTER = "--keyshared-adapter"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's command-line options (all optional: without an adapter the plugin adds no items)."""
    group = parser.getgroup("keyshared", "Key-Shared conformance suite")
    group.addoption(
        OPTION_ADAPTER,
        metavar="ADAPTER",
        help='run the conformance suite against ADAPTER (reference, py:module:factory or cmd:"...") '
        "and report one test per requirement",
    )
    group.addoption("--keyshared-profile", default="ci", choices=("ci", "thorough"), help="how hard to look")
    group.addoption("--keyshared-seed", type=int, default=0, help="the run's seed (same seed, same run)")
    group.addoption(
        "--keyshared-examples",
        type=int,
        metavar="N",
        help="examples per stratum and round instead of the profile's budget (as `conformance run --examples`)",
    )
    group.addoption("--keyshared-report", metavar="FILE", help="also write the JSON-lines conformance report")
    group.addoption("--keyshared-scenarios", metavar="DIR", help="save each failure's replayable scenario here")


class ConformanceRun:
    """One suite run shared by every requirement item of a session, started at the first item."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._result: Any = None
        self._error: str | None = None

    def result(self) -> Any:
        """The finished run; raises `AdapterError` if the adapter could not be started."""
        if self._result is None and self._error is None:
            self._start()
        if self._error is not None:
            raise AdapterError(self._error)
        return self._result

    def _start(self) -> None:
        from ks_spec.errors import UserError

        from ks_conformance import report
        from ks_conformance.adapters import connect
        from ks_conformance.protocol import StartFailed
        from ks_conformance.results import report_lines, settings_for
        from ks_conformance.suite import run_suite

        option = self.config.getoption
        adapter = str(option(OPTION_ADAPTER))
        scenarios = option("--keyshared-scenarios")
        budget = _examples_budget(self.config)
        try:
            connect(adapter)  # a malformed adapter name is a usage error before anything runs
            self._result = run_suite(
                lambda: connect(adapter),
                settings_for(str(option("--keyshared-profile")), int(option("--keyshared-seed")), **budget),
                scenarios=Path(scenarios) if scenarios else None,
            )
        except (StartFailed, UserError) as error:
            self._error = f"the adapter {adapter} failed to start: {error}"
            return
        path = option("--keyshared-report")
        if path:
            report.write_report(report_lines(self._result), Path(path))


class AdapterError(Exception):
    """The adapter did not start or the run could not judge it."""


class RequirementItem(pytest.Item):
    """One requirement of the spec, judged by the session's conformance run."""

    def __init__(self, *, requirement: str, title: str, run: ConformanceRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.requirement = requirement
        self.title = title
        self.run = run

    def runtest(self) -> None:
        """Fail, skip or pass as the run's line for this requirement says."""
        result = self.run.result()
        if result.faults:
            fault = result.faults[0][0]
            raise AdapterError(f"the run is unknown: adapter fault ({fault.kind}): {fault.message}")
        line = next(r for r in result.requirements if r["id"] == self.requirement)
        status = line["status"]
        if status == "failed":
            explained = [a.explanation.text() for a in result.anomalies if a.requirement == self.requirement]
            raise RequirementViolated(self.requirement, explained)
        if status == "warning":
            warnings.warn(f"{self.requirement} (SHOULD) is violated", stacklevel=1)
        elif status in ("skipped", "untested", "vacuous"):
            pytest.skip(f"{status}: {line.get('reason', '')}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """The plain-language explanation, not a traceback into the plugin."""
        if isinstance(excinfo.value, RequirementViolated | AdapterError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path | str, int | None, str]:
        """How pytest names the item."""
        return ("keyshared", None, f"{self.requirement}: {self.title}")


class RequirementViolated(Exception):
    """A MUST requirement the run shows violated, with each witness explained."""

    def __init__(self, requirement: str, explanations: list[str]) -> None:
        shown = "\n".join(f"- {text}" for text in explanations[:5])
        more = f"\n(and {len(explanations) - 5} more)" if len(explanations) > 5 else ""
        super().__init__(f"{requirement} is violated:\n{shown}{more}")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --keyshared-adapter, add one item per requirement of the spec."""
    if not config.getoption(OPTION_ADAPTER):
        return
    from ks_spec.requirements import load_index

    run = ConformanceRun(config)
    for entry in load_index():
        identifier = str(entry["id"])
        items.append(
            RequirementItem.from_parent(
                session, name=f"keyshared::{identifier}", requirement=identifier, title=str(entry["title"]), run=run
            )
        )


def _examples_budget(config: pytest.Config) -> dict[str, int]:
    """`--keyshared-examples N`: exactly N examples per stratum and round, not the profile's total budget."""
    examples = config.getoption("--keyshared-examples")
    return {} if examples is None else {"max_examples": max(1, int(examples)), "examples_total": 0}


@pytest.fixture
def keyshared_suite(tmp_path: Path, pytestconfig: pytest.Config) -> Iterator[Callable[..., Any]]:
    """Run the suite against an adapter: `keyshared_suite("py:mybroker:create", profile="ci", seed=0)`.

    Returns the `RunResult` (`.verdict`, `.requirements`, `.anomalies`); scenarios go to `tmp_path`;
    `--keyshared-examples` sets the budget as it does for `--keyshared-adapter` runs.
    """
    from ks_conformance.adapters import connect
    from ks_conformance.results import settings_for
    from ks_conformance.suite import run_suite

    budget = _examples_budget(pytestconfig)

    def run(adapter: str, profile: str = "ci", seed: int = 0) -> Any:
        settings = settings_for(profile, seed, **budget)
        return run_suite(lambda: connect(adapter), settings, scenarios=tmp_path / "scenarios")

    yield run
