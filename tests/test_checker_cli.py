"""`keyshared check-trace`: verdicts, exit codes, explained witnesses, and reports that match their schema."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from keyshared.cli import main
from ks_conformance.builder import TraceBuilder
from ks_conformance.report import read_report, to_junit, to_markdown
from ks_spec import paths

EXAMPLES = paths.SPEC_DIR / "examples" / "traces"


def _reordering_trace(path: Path) -> Path:
    t = TraceBuilder(profile="owner").add("c1", capacity=1)
    t.deliver(t.publish("x"), "c1")
    t.held(t.publish("k"), "capacity", "c1")
    t.ack(0, "c1").persisted(1)
    t.deliver(t.publish("k"), "c1")
    t.write(path)
    return path


def test_a_violating_trace_is_invalid_with_an_explained_witness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check-trace", str(_reordering_trace(tmp_path / "bad.jsonl"))])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("invalid")
    assert "overtaken-hold (KS-FLW-3, MUST) at seq 9" in out
    assert "Let m1 = publish(offset=1, key='k') [seq 4]" in out
    assert ": a contradiction." in out
    assert "held(offset=1, key='k', consumer='c1', reason='capacity') [seq 5, tick 0]" in out


@pytest.mark.parametrize("trace", sorted((EXAMPLES / "good").glob("*.jsonl")), ids=lambda p: p.name)
def test_the_well_formed_sample_traces_are_valid(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-trace", str(trace)]) == 0
    assert capsys.readouterr().out.startswith("valid")


@pytest.mark.parametrize("trace", sorted((EXAMPLES / "bad").glob("*.jsonl")), ids=lambda p: p.name)
def test_malformed_traces_are_unknown_and_say_where(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-trace", "--quiet", str(trace)]) == 2
    out = capsys.readouterr().out
    assert out.startswith("unknown")
    assert f"{trace.name}:" in out


def test_exit_codes_merge_invalid_over_unknown_over_valid(tmp_path: Path) -> None:
    good = EXAMPLES / "good" / "strict-basic.jsonl"
    malformed = EXAMPLES / "bad" / "seq-gap.jsonl"
    bad = _reordering_trace(tmp_path / "bad.jsonl")
    assert main(["check-trace", "--quiet", str(good)]) == 0
    assert main(["check-trace", "--quiet", str(good), str(malformed)]) == 2
    assert main(["check-trace", "--quiet", str(malformed), str(bad), str(good)]) == 1


def test_missing_trace_is_one_line_exit_66(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "keyshared", "check-trace", str(tmp_path / "absent.jsonl")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 66
    assert completed.stderr.count("\n") == 1 and "absent.jsonl" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_reports_validate_and_render(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _reordering_trace(tmp_path / "bad.jsonl")
    good = EXAMPLES / "good" / "owner-draining.jsonl"
    report, junit, markdown = tmp_path / "r.jsonl", tmp_path / "r.xml", tmp_path / "r.md"
    outputs = ["--report", str(report), "--junit", str(junit), "--markdown", str(markdown)]
    code = main(["check-trace", "--quiet", str(bad), str(good), *outputs])
    assert code == 1
    lines = read_report(report)
    types = ["header", "trace"] + ["violation"] * 3 + ["trace", "departure", "footer"]  # owner-draining: profile owner
    assert [line["type"] for line in lines] == types
    assert lines[-1]["verdict"] == "invalid"
    assert lines[-1]["violated"] == ["KS-FLW-3", "KS-ISO-1", "KS-ORD-1"]
    violation = next(line for line in lines if line["type"] == "violation" and line["anomaly"] == "key-reorder")
    assert [e["seq"] for e in violation["events"]] == violation["witness"] == [4, 8, 9]
    suite = ET.fromstring(junit.read_text(encoding="utf-8"))
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    assert junit.read_text(encoding="utf-8") == to_junit(lines)
    assert "# keyshared check-trace: invalid" in markdown.read_text(encoding="utf-8")
    assert markdown.read_text(encoding="utf-8") == to_markdown(lines)


def test_parquet_traces_are_checked_like_json_lines(tmp_path: Path) -> None:
    bad = _reordering_trace(tmp_path / "bad.jsonl")
    from ks_spec.trace import load_trace, write_trace

    write_trace(load_trace(bad), tmp_path / "bad.parquet")
    assert main(["check-trace", "--quiet", str(tmp_path / "bad.parquet")]) == 1
