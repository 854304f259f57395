"""`--write-readme`: a benchmark replaces its own section of benchmarks/README.md with what it printed.

The section lies between two marker comments named after the benchmark (and its part, for a benchmark run
part by part); the new one holds the date, the machine, the command and the printed output as it appeared.
Nothing is written when the run fails, or for a `--quick` run (it checks the script; its figures are not
the benchmark's).
"""

from __future__ import annotations

import datetime
import io
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.host import machine

README = Path(__file__).resolve().parent / "README.md"
FLAG = "--write-readme"
HELP = "after a successful run, replace this benchmark's section of benchmarks/README.md with what it printed"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def command_of(section: str) -> str:
    """The run that writes a section: `bench_conformance.procrastinate` is `--only procrastinate`."""
    module, _, part = section.partition(".")
    return f"python -m benchmarks.{module}" + (f" --only {part}" if part else "") + f" {FLAG}"


def markers(section: str) -> tuple[str, str]:
    """The comments that open and close a section."""
    return f"<!-- begin {section}: {command_of(section)} replaces this section -->", f"<!-- end {section} -->"


def replace_section(text: str, section: str, body: str) -> str:
    """The README text with the section's body replaced; ValueError when its markers are not there once each."""
    begin, end = markers(section)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"no section {section} (expected the lines {begin!r} and {end!r})")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body.strip()}\n{end}{tail}"


def render(printed: str, machine: str, when: datetime.datetime, command: str) -> str:
    """A section's body: date and machine, the command, and the output in a fenced block."""
    output = ANSI.sub("", printed).rstrip()
    return f"Measured {when:%Y-%m-%d %H:%M} UTC on {machine}.\nCommand: `{command}`\n\n```text\n{output}\n```"


def write_section(section: str, body: str, path: Path = README) -> None:
    """Replace the section in `path`, atomically (a reader never sees half a file)."""
    text = replace_section(path.read_text(encoding="utf-8"), section, body)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


class _Tee(io.TextIOBase):
    """Standard output that is also kept, so the section holds exactly what the run printed."""

    def __init__(self, stream: io.TextIOBase) -> None:
        self.stream = stream
        self.kept = io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


_recording: tuple[str, _Tee] | None = None


def record(enabled: bool, section: str, quick: bool = False, path: Path = README) -> None:
    """Called by a benchmark after parsing its options: start keeping what it prints for `section`.

    Refuses at once (before minutes of measuring) a --quick run or a section the README does not have.
    """
    global _recording
    if not enabled:
        return
    if quick:
        raise SystemExit(f"{FLAG}: a --quick run checks the script; its figures are not written to {path.name}")
    try:
        replace_section(path.read_text(encoding="utf-8"), section, "")
    except (OSError, ValueError) as error:
        raise SystemExit(f"{FLAG}: {error}") from None
    tee = _Tee(sys.stdout)  # type: ignore[arg-type]
    sys.stdout = tee
    _recording = (section, tee)


def run(main: Callable[[], None], path: Path = README) -> None:
    """Run a benchmark's main; if it asked to record and ended normally, write its section."""
    global _recording
    try:
        main()
    finally:
        recording, _recording = _recording, None
        if recording is not None:
            sys.stdout = recording[1].stream
    if recording is None:
        return
    section, tee = recording
    module = section.split(".", 1)[0]
    command = shlex.join(["python", "-m", f"benchmarks.{module}", *sys.argv[1:]])
    body = render(tee.kept.getvalue(), machine(), datetime.datetime.now(datetime.UTC), command)
    write_section(section, body, path)
    print(f"wrote section {section} of {path}")
