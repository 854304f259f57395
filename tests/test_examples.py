"""examples/: the toy adapter is conformant, its broken twin fails exactly what its checked-in report says, and the
report's scenarios replay as examples/README.md tells (violated by the twin, passed by the toy).

Every run goes through the CLI over stdio, as a newcomer runs it, from the repository root so that the paths in
what it writes are the relative ones the checked-in report shows.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
REPORT = EXAMPLES / "toy_adapter_broken.REPORT.md"
KEYSHARED = [sys.executable, "-c", "import sys; from keyshared.cli import main; sys.exit(main())"]
# -S: no site-packages, so an import outside the standard library would fail the adapter at start.
TOY = f"cmd:{sys.executable} -S examples/toy_adapter.py"
BROKEN = f"cmd:{sys.executable} -S examples/toy_adapter_broken.py"
FAILED_ROW = re.compile(r"^\| (KS-[A-Z]+-\d+) \| MUST \| failed \|", re.MULTILINE)
VIOLATION_ITEM = re.compile(r"^- \*\*([a-z-]+)\*\* \((KS-[A-Z]+-\d+), (?:MUST|SHOULD)\) in `([^`]+)`", re.MULTILINE)


def keyshared(*arguments: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the keyshared CLI from the repository root."""
    return subprocess.run(
        [*KEYSHARED, *arguments], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def read_report(path: Path) -> list[dict[str, object]]:
    """The lines of a JSON-lines report."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def checked_in() -> tuple[dict[str, str], set[str], set[tuple[str, str]], set[str]]:
    """From the checked-in Markdown: its settings, failed MUST requirements, (anomaly, requirement) pairs, scenarios."""
    text = REPORT.read_text(encoding="utf-8")
    settings_line = next(line for line in text.splitlines() if line.startswith("Settings: "))
    settings = dict(item.split(" = ", 1) for item in settings_line.removeprefix("Settings: ").strip().split(", "))
    violations = VIOLATION_ITEM.findall(text)
    return (
        settings,
        set(FAILED_ROW.findall(text)),
        {(kind, requirement) for kind, requirement, _ in violations},
        {scenario for _, _, scenario in violations},
    )


def test_the_toy_needs_only_the_standard_library() -> None:
    for name in ("toy_adapter.py", "toy_adapter_broken.py"):
        tree = ast.parse((EXAMPLES / name).read_text(encoding="utf-8"))
        imported = {
            alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        }
        imported |= {
            node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
        }
        assert imported - {"toy_adapter"} <= sys.stdlib_module_names, f"{name}: {imported}"


def test_the_toy_passes_smoke() -> None:
    completed = keyshared("conformance", "smoke", "--adapter", TOY)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "smoke ok: toy-adapter" in completed.stdout


def toy_ci_run(tmp_path: Path, *budget: str) -> None:
    """A ci run of the toy ends conformant, and its ops are exercised, not merely declared."""
    report = tmp_path / "toy.jsonl"
    arguments = ["--profile", "ci", "--seed", "0", *budget, "--report", str(report), "--scenarios", str(tmp_path)]
    completed = keyshared("conformance", "run", "--adapter", TOY, *arguments)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr
    lines = read_report(report)
    assert lines[-1]["verdict"] == "conformant"
    status = {line["id"]: line["status"] for line in lines if line["type"] == "requirement"}
    # what publish, add_consumer, remove_consumer, ack and capacity put at stake (spec sections 6, 7, 8, 9, 12, 13, 15)
    for requirement in ("KS-ORD-1", "KS-ORD-2", "KS-DRN-1", "KS-FLW-1", "KS-ACK-1", "KS-ACK-2", "KS-MEM-1", "KS-RES-2"):
        assert status[requirement] == "passed", (requirement, status[requirement])
    assert "vacuous" not in status.values()


def test_the_toy_is_conformant_in_a_small_ci_run(tmp_path: Path) -> None:
    toy_ci_run(tmp_path, "--examples", "10")


@pytest.mark.slow
def test_the_toy_is_conformant_in_the_readmes_ci_run(tmp_path: Path) -> None:
    """The README's command as it stands: the full ci budget (15 s idle, 45 s on a busy two-core machine)."""
    toy_ci_run(tmp_path)


def test_the_broken_twin_fails_what_its_report_says(tmp_path: Path) -> None:
    """A fresh run with the checked-in report's settings fails the same requirements with the same anomaly kinds."""
    settings, failed, anomalies, _ = checked_in()
    assert "KS-MEM-1" in failed, "the planted bug (a leaver's messages forgotten) must show in the report"
    report = tmp_path / "broken.jsonl"
    completed = keyshared(
        "conformance",
        "run",
        "--adapter",
        BROKEN,
        *("--profile", settings["profile"], "--seed", settings["seed"], "--examples", settings["max_examples"]),
        *("--report", str(report), "--scenarios", str(tmp_path / "sc")),
    )
    assert completed.returncode == 1, completed.stdout[-3000:] + completed.stderr
    lines = read_report(report)
    assert lines[-1]["verdict"] == "not-conformant"
    assert REPORT.read_text(encoding="utf-8").startswith("# keyshared conformance: not-conformant")
    fresh_failed = {line["id"] for line in lines if line["type"] == "requirement" and line["status"] == "failed"}
    fresh_anomalies = {(line["anomaly"], line["id"]) for line in lines if line["type"] == "violation"}
    assert fresh_failed == failed
    assert fresh_anomalies == anomalies


def test_the_reports_scenarios_fail_the_twin_and_pass_the_toy() -> None:
    _, _, _, scenarios = checked_in()
    assert scenarios == {f"examples/scenarios/{p.name}" for p in (EXAMPLES / "scenarios").glob("*.jsonl")}
    for adapter, verdict, code in ((BROKEN, "violates", 1), (TOY, "passes", 0)):
        completed = keyshared("conformance", "replay", "--adapter", adapter, *sorted(scenarios))
        assert completed.returncode == code, completed.stdout + completed.stderr
        for scenario in scenarios:
            assert f"{verdict} {scenario} " in completed.stdout, (scenario, completed.stdout)


def test_the_checked_in_report_is_machine_independent() -> None:
    text = REPORT.read_text(encoding="utf-8")
    assert str(ROOT) not in text and str(Path.home()) not in text
    assert "## Limits reached" not in text  # a wall-clock cap fired: another machine could shrink differently
    assert "## Adapter faults" not in text
