"""Reports (spec/report-format.md): JSON lines with a schema, and their JUnit and Markdown renderings.

A report is a list of JSON objects, one per line: a `header`, then `requirement`, `trace`, `violation`
and `error` lines, then a `footer` with the verdict. The same shape serves a conformance run and a
`check-trace` run (the header's `kind` says which). Writing is atomic: a report file is either whole
or absent.
"""

from __future__ import annotations

import json
import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from ks_spec import SPEC_VERSION, paths
from ks_spec.departures import DEPARTURES, departure_line, departures_of
from ks_spec.errors import MissingInput, UserError

REPORT_VERSION = 1
CHECKING_VERSION = 1
REPORT_SCHEMA = paths.SCHEMA_DIR / "report-v1.schema.json"

STATUSES = ("passed", "failed", "warning", "vacuous", "skipped", "untested")
"""A requirement's status in a conformance run (spec/report-format.md section 3)."""

Line = dict[str, Any]


def now_iso() -> str:
    """The current UTC time, ISO 8601 with a Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def tool() -> dict[str, str]:
    """Who wrote the report."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("keyshared")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        installed = "0"
    return {"name": "keyshared", "version": installed}


def header(kind: str, **fields: Any) -> Line:
    """The first line of a report."""
    line: Line = {
        "type": "header",
        "report_version": REPORT_VERSION,
        "kind": kind,
        "tool": tool(),
        "spec_version": SPEC_VERSION,
        "checking_version": CHECKING_VERSION,
        "started": now_iso(),
    }
    line.update({name: value for name, value in fields.items() if value is not None})
    return line


def write_report(lines: Iterable[Line], path: Path) -> int:
    """Write report lines atomically (all or nothing); return how many were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(json.dumps(line, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
                handle.write("\n")
                count += 1
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return count


def write_text(text: str, path: Path) -> None:
    """Write a rendering (JUnit, Markdown) atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_report(path: Path) -> list[Line]:
    """Read a report, validating every line against the schema; UserError names the line of a problem."""
    if not path.is_file():
        raise MissingInput(f"{path}: no such report")
    lines: list[Line] = []
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as error:
                raise UserError(f"{path}:{number}: field '(line)': not valid JSON ({error.msg})") from None
            problem = schema_problem(line)
            if problem:
                raise UserError(f"{path}:{number}: {problem}")
            lines.append(line)
    if not lines or lines[0].get("type") != "header":
        raise UserError(f"{path}:1: field 'type': a report starts with a header line")
    return lines


@cache
def _validator() -> Any:
    import jsonschema

    with open(REPORT_SCHEMA, encoding="utf-8") as handle:
        schema = json.load(handle)
    return jsonschema.Draft7Validator(schema)


def schema_problem(line: Any) -> str | None:
    """None if a report line matches spec/schemas/report-v1.schema.json, else "field 'x': problem"."""
    errors = sorted(_validator().iter_errors(line), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    best = min(errors, key=lambda e: len(list(e.absolute_path)))
    if best.validator in ("oneOf", "anyOf"):
        kind = line.get("type") if isinstance(line, dict) else None
        return f"field 'type': not a valid report line of type {kind!r}"
    place = ".".join(str(p) for p in best.absolute_path) or "(line)"
    return f"field '{place}': {best.message}"


def trace_departure_lines(configs: Iterable[Mapping[str, Any]]) -> list[Line]:
    """The departures sheet of judged traces (spec section 21.1): each choice some trace's configuration took, with
    how many traces took it (a trace records its configuration, not what its system declares)."""
    in_effect: dict[str, int] = {}
    for config in configs:
        for departure in departures_of(config):
            in_effect[departure.label] = in_effect.get(departure.label, 0) + 1
    return [departure_line(d, None, in_effect[d.label]) for d in DEPARTURES if d.label in in_effect]


def trace_departure_summary(configs: Iterable[Mapping[str, Any]]) -> str | None:
    """The verdict's second part for judged traces, as a terminal prints it: None if no configuration departs."""
    sheet = trace_departure_lines(configs)
    return departure_summary(sheet) if sheet else None


def departure_summary(lines: Sequence[Line]) -> str:
    """The verdict's second part in one phrase: what the judged system gives up, or that it keeps strict Key-Shared."""
    sheet = [line for line in lines if line.get("type") == "departure"]
    if not sheet:
        return "no departure from strict Key-Shared declared"
    return "departs from strict Key-Shared in " + "; ".join(f"{line['guarantee']} ({line['choice']})" for line in sheet)


def footer_of(lines: Sequence[Line]) -> Line:
    """The footer line of a report (UserError if it has none: the run was cut short)."""
    for line in reversed(lines):
        if line.get("type") == "footer":
            return line
    raise UserError("the report has no footer line: the run did not finish")


# --- renderings ----------------------------------------------------------------------------------


def to_junit(lines: Sequence[Line]) -> str:
    """JUnit XML: one test case per requirement (conformance) or per trace (check-trace)."""
    head = lines[0]
    footer = footer_of(lines)
    violations: dict[str, list[Line]] = {}
    for line in lines:
        if line["type"] == "violation":
            violations.setdefault(line.get("trace") or line["id"], []).append(line)
    cases = ET.Element("testsuite", name=f"keyshared {head['kind']}")
    failures = skipped = total = 0
    for line in lines:
        if line["type"] == "requirement":
            total += 1
            case = ET.SubElement(
                cases,
                "testcase",
                classname=f"keyshared.{line['id'].split('-')[1]}",
                name=f"{line['id']} {line['title']}",
            )
            status = line["status"]
            if status == "failed":
                failures += 1
                found = violations.get(line["id"], [])
                failure = ET.SubElement(case, "failure", message=f"{line['level']} violated: {_anomaly_list(found)}")
                failure.text = "\n\n".join(v["text"] for v in found)
            elif status in ("skipped", "vacuous", "untested"):
                skipped += 1
                ET.SubElement(case, "skipped", message=f"{status}: {line.get('reason', '')}")
            elif status == "warning":
                out = ET.SubElement(case, "system-out")
                out.text = "SHOULD violated:\n" + "\n\n".join(v["text"] for v in violations.get(line["id"], []))
        elif line["type"] == "trace":
            total += 1
            case = ET.SubElement(cases, "testcase", classname="keyshared.check-trace", name=line["path"])
            if line["verdict"] == "invalid":
                failures += 1
                found = violations.get(line["path"], [])
                failure = ET.SubElement(case, "failure", message=f"invalid: {_anomaly_list(found)}")
                failure.text = "\n\n".join(v["text"] for v in found)
            elif line["verdict"] == "unknown":
                error = ET.SubElement(case, "error", message="unknown: the trace could not be judged")
                error.text = line.get("malformed") or "; ".join(p["message"] for p in line.get("problems", []))
    errors = [line for line in lines if line["type"] == "error"]
    for line in errors:
        total += 1
        case = ET.SubElement(cases, "testcase", classname="keyshared.adapter", name=f"adapter {line['kind']}")
        error = ET.SubElement(case, "error", message=line["message"])
        error.text = line.get("traceback") or line.get("stderr") or ""
    cases.set("tests", str(total))
    cases.set("failures", str(failures))
    cases.set("errors", str(len(errors)))
    cases.set("skipped", str(skipped))
    properties = ET.SubElement(cases, "properties")
    ET.SubElement(properties, "property", name="verdict", value=str(footer["verdict"]))
    ET.SubElement(properties, "property", name="departures", value=departure_summary(lines))
    ET.SubElement(properties, "property", name="spec_version", value=str(head["spec_version"]))
    ET.indent(cases)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(cases, encoding="unicode") + "\n"


def _anomaly_list(violations: Iterable[Line]) -> str:
    names: dict[str, int] = {}
    for violation in violations:
        names[violation["anomaly"]] = names.get(violation["anomaly"], 0) + 1
    return ", ".join(f"{name} x{count}" for name, count in names.items()) or "no witness recorded"


def violation_notes(line: Mapping[str, Any]) -> list[str]:
    """What a reader must know besides the explanation: a witness not shrunk, anomalies that came first."""
    notes = []
    if line.get("shrunk") is False:
        notes.append(
            "not shrunk: seen in an example while the suite searched for other kinds; the scenario is that example"
        )
    earlier = line.get("preceded_by")
    if earlier:
        named = ", ".join(sorted({f"{e['anomaly']}" for e in earlier}))
        notes.append(f"the same example showed {named} first: this may be a consequence of it")
    shape = line.get("shape")
    if isinstance(shape, Mapping):
        cause = f"after a {shape['cause']}" if shape["cause"] != "none" else "with no failure or return before it"
        ops = ", ".join(f"{op} {count}" for op, count in shape.get("triggers", {}).items())
        notes.append(f"shape: {line['anomaly']} {cause}; seen in {shape['examples']} examples (per op: {ops})")
    reproduced = line.get("reproduced")
    if isinstance(reproduced, Mapping):
        notes.append(
            f"reproduced {reproduced['shown']} of {reproduced['replays']} replays of its scenario "
            "(the adapter declares itself nondeterministic)"
        )
    return notes


def to_markdown(lines: Sequence[Line]) -> str:
    """A Markdown summary: the verdict, a table of requirements (or traces), then each violation explained."""
    head = lines[0]
    footer = footer_of(lines)
    out = [f"# keyshared {head['kind']}: {footer['verdict']}", ""]
    implementation = head.get("implementation")
    if isinstance(implementation, Mapping):
        out.append(f"Implementation: **{implementation.get('name')}** {implementation.get('version', '')}  ")
    if head.get("adapter"):
        out.append(f"Adapter: `{head['adapter']}`  ")
    settings = head.get("settings")
    if isinstance(settings, Mapping):
        out.append("Settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items()) + "  ")
    out.append(f"Spec version {head['spec_version']}, report version {head['report_version']}.")
    out.append("")
    out.append(f"Verdict: **{footer['verdict']}**; {departure_summary(lines)}.")
    out.append("")
    requirements = [line for line in lines if line["type"] == "requirement"]
    if requirements:
        out += ["| requirement | level | status | exercised | title |", "|---|---|---|---|---|"]
        for line in requirements:
            exercised = sum(line.get("exercised", {}).values())
            status = line["status"] + (f" ({line['reason']})" if line.get("reason") else "")
            out.append(f"| {line['id']} | {line['level']} | {status} | {exercised} | {line['title']} |")
        out.append("")
    traces = [line for line in lines if line["type"] == "trace"]
    if traces:
        out += ["| trace | events | verdict | anomalies |", "|---|---|---|---|"]
        for line in traces:
            anomalies = ", ".join(f"{k} {v}" for k, v in line.get("anomalies", {}).items()) or "none"
            out.append(f"| `{line['path']}` | {line['events']} | {line['verdict']} | {anomalies} |")
        out.append("")
    sheet = [line for line in lines if line["type"] == "departure"]
    out += ["## Departures from strict Key-Shared", ""]
    if sheet:
        judged = "its declared semantics" if head["kind"] != "check-trace" else "the configuration each trace records"
        out += [
            f"Judged against {judged}: each choice below is kept by its own rule and is not a failure "
            "(spec section 21.1).",
            "",
            "| choice | guarantee given up | rule kept | relaxes | in effect | what it means |",
            "|---|---|---|---|---|---|",
        ]
        unit = "examples" if head["kind"] != "check-trace" else "traces"
        for line in sheet:
            relaxes = ", ".join(line["relaxes"]) or "none"
            used = f"{line['in_effect']} {unit}" + (" (declared)" if line.get("declared") else "")
            out.append(
                f"| `{line['choice']}` | {line['guarantee']} | {line['rule']} | {relaxes} | {used} | {line['text']} |"
            )
    else:
        out.append("None: every guarantee of strict Key-Shared was judged as the spec states it.")
    out.append("")
    violations = [line for line in lines if line["type"] == "violation"]
    if violations:
        out += ["## Violations", ""]
        for line in violations:
            where = line.get("scenario") or line.get("trace") or ""
            out.append(f"- **{line['anomaly']}** ({line['id']}, {line['level']}){f' in `{where}`' if where else ''}:")
            out.append(f"  {line['text']}")
            out += [f"  *{note}*" for note in violation_notes(line)]
        out.append("")
    if footer.get("limits"):
        out += ["## Limits reached", ""]
        out += [f"- {limit}" for limit in footer["limits"]]
        out.append("")
    errors = [line for line in lines if line["type"] == "error"]
    if errors:
        out += ["## Adapter faults", ""]
        out += [f"- {line['kind']}: {line['message']}" for line in errors]
        out.append("")
    return "\n".join(out)
