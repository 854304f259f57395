"""`--write-readme`: a benchmark rewrites its own section of benchmarks/README.md, and only after a whole run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py"))


@pytest.fixture
def readme(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """benchmarks.readme, imported from the repository root (benchmarks/ is not installed)."""
    monkeypatch.syspath_prepend(str(ROOT))
    import benchmarks.readme as module

    return module


def two_sections(readme: ModuleType, tmp_path: Path) -> Path:
    path = tmp_path / "README.md"
    a, b = readme.markers("bench_a"), readme.markers("bench_b.part")
    path.write_text(f"# figures\n{a[0]}\nold a\n{a[1]}\nbetween\n{b[0]}\nold b\n{b[1]}\ntail\n", encoding="utf-8")
    return path


def test_a_run_replaces_its_own_section_with_what_it_printed(
    readme: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = two_sections(readme, tmp_path)
    monkeypatch.setattr(sys, "argv", ["bench_b", "--only", "part", "--write-readme"])

    def main() -> None:
        readme.record(True, "bench_b.part", path=path)
        print("\x1b[1mfigure\x1b[0m | 42")

    readme.run(main, path)
    text = path.read_text(encoding="utf-8")
    assert "old b" not in text and "old a" in text and "between" in text and text.endswith("tail\n")
    section = text.split(readme.markers("bench_b.part")[0])[1].split(readme.markers("bench_b.part")[1])[0]
    assert "figure | 42" in section and "\x1b" not in section
    assert re.search(r"Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC on .+ cores", section)
    assert "`python -m benchmarks.bench_b --only part --write-readme`" in section


def test_a_failed_run_writes_nothing(readme: ModuleType, tmp_path: Path) -> None:
    path = two_sections(readme, tmp_path)
    before = path.read_text(encoding="utf-8")

    def main() -> None:
        readme.record(True, "bench_a", path=path)
        print("half a table")
        raise RuntimeError("the benchmark broke")

    with pytest.raises(RuntimeError):
        readme.run(main, path)
    assert path.read_text(encoding="utf-8") == before
    assert not isinstance(sys.stdout, readme._Tee)


def test_quick_runs_and_unknown_sections_are_refused_before_measuring(readme: ModuleType, tmp_path: Path) -> None:
    path = two_sections(readme, tmp_path)
    with pytest.raises(SystemExit, match="--quick"):
        readme.record(True, "bench_a", quick=True, path=path)
    with pytest.raises(SystemExit, match="no section bench_c"):
        readme.record(True, "bench_c", path=path)
    readme.record(False, "bench_c", path=path)  # without the flag nothing is checked or kept
    assert readme._recording is None


def test_every_benchmark_offers_the_flag_and_has_its_sections(readme: ModuleType) -> None:
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert BENCHMARKS
    for name in BENCHMARKS:
        shown = subprocess.run(
            [sys.executable, "-m", f"benchmarks.{name}", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        assert readme.FLAG in shown, name
        parts = re.search(r"--only \{([a-z,]+)\}", shown)
        sections = [name] + [f"{name}.{part}" for part in parts.group(1).split(",")] if parts else [name]
        for section in sections:
            readme.replace_section(text, section, "")  # raises when the markers are missing
