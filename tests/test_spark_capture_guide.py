"""The streaming user's guide (spec/streaming-guide.md) stays true: its commands parse with the real CLI, the names
its code uses exist with the arguments it gives them, its anomaly table names real anomaly kinds, the example
variants it points to are the modules' own, and (slow tier) its worked example runs as printed."""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from keyshared.cli import build_parser
from spark_support import spark_missing

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "spec" / "streaming-guide.md"
STREAMING = ROOT / "spec" / "streaming.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
OPERATORS = {"||", "&&", ";", "|", "&"}


def _blocks(language: str, document: Path = GUIDE) -> list[str]:
    return [body for lang, body in BLOCK.findall(document.read_text(encoding="utf-8")) if lang == language]


def _prose(document: Path = GUIDE) -> str:
    return BLOCK.sub("", document.read_text(encoding="utf-8"))


def _commands() -> list[list[str]]:
    """Every `keyshared ...` command of the guide's sh blocks, as argv (up to the first shell operator)."""
    found = []
    for body in _blocks("sh"):
        for line in body.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
            if tokens[:1] != ["keyshared"]:
                continue
            argv = []
            for token in tokens[1:]:
                if token in OPERATORS:
                    break
                argv.append(token)
            found.append(argv)
    return found


def test_every_keyshared_command_of_the_guide_parses_with_the_real_cli() -> None:
    commands = _commands()
    assert ["watch-stream", "--judge-only", "--capture", "cap", "--judge", "none", "--out", "trace.jsonl"] in commands
    assert {argv[0] for argv in commands} >= {"watch-stream", "check-trace", "validate-replay"}
    parser = build_parser()
    for argv in commands:
        try:
            parser.parse_args(argv)
        except SystemExit as stop:
            pytest.fail(f"the guide's `keyshared {shlex.join(argv)}` does not parse (exit {stop.code})")


def _options(parser: argparse.ArgumentParser, command: str) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {option for sub in action.choices[command]._actions for option in sub.option_strings}
    raise AssertionError(command)


def test_every_option_the_guide_names_is_one_of_watch_stream_or_the_judges() -> None:
    parser = build_parser()
    known = set().union(*(_options(parser, c) for c in ("watch-stream", "check-trace", "validate-replay")))
    named = set(re.findall(r"`(--[a-z][a-z-]*)", _prose()))
    assert {"--witnesses", "--set", "--checkpoint", "--partitions", "--master"} <= named
    assert named <= known, named - known


def _signature_names(target: Any) -> set[str]:
    return set(inspect.signature(target).parameters)


def test_the_guides_code_uses_only_what_the_capture_has_with_the_arguments_it_takes() -> None:
    """Attributes of `capture`, keywords of Capture(), its methods and probe_counts, imports, the column constants."""
    import importlib

    from ks_spark.capture import recorder, watch
    from ks_spark.capture.recorder import Capture

    callables = {"Capture": Capture.__init__, "probe_counts": recorder.probe_counts}
    snippets = _blocks("python") + re.findall(r"`([A-Za-z_][\w.]*\([^`]*\))`", _prose())
    assert len(snippets) >= 4
    constants = {name for name, _ in watch.COLUMNS}
    seen_keywords: set[str] = set()
    for snippet in snippets:
        tree = ast.parse(snippet.replace("...", "None"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "capture":
                assert hasattr(Capture("."), node.attr), f"capture.{node.attr}"
            if isinstance(node, ast.Call):
                function = node.func
                target = None
                if isinstance(function, ast.Name) and function.id in callables:
                    target = callables[function.id]
                elif isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
                    if function.value.id == "capture":
                        target = getattr(Capture, function.attr)
                if target is not None:
                    keywords = {k.arg for k in node.keywords if k.arg}
                    assert keywords <= _signature_names(target), (ast.unparse(node), keywords)
                    seen_keywords |= keywords
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ks_spark"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module}.{alias.name}"
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                if name.endswith("_COLUMN"):
                    assert name in constants, name
    assert {"probe", "key_column", "offset_column", "checkpoint"} <= seen_keywords


def test_the_guides_anomaly_table_names_real_anomaly_kinds() -> None:
    from ks_conformance.rules import BY_NAME

    rows = re.findall(r"^\| `([a-z-]+)` \|", GUIDE.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(rows) >= 10
    assert set(rows) <= set(BY_NAME), set(rows) - set(BY_NAME)


def test_the_example_variants_documented_are_the_modules_own() -> None:
    """streaming.md section 5 lists every broken variant of the balances example, and only those."""
    from ks_spark.capture.examples import balances

    section = STREAMING.read_text(encoding="utf-8").split("## 5 ", 1)[1].split("\n## ", 1)[0]
    table = section.split("balances.py", 1)[1]
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.MULTILINE))
    assert listed == set(balances.VARIANTS) - {"correct"}


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing()))
def test_the_guides_worked_example_runs_as_printed(tmp_path: Path) -> None:
    """The sh block that writes the example's log: run with bash -e, it ends with the verdict the guide prints."""
    (script,) = [body for body in _blocks("sh") if "write_log(" in body]
    (printed,) = [body for body in _blocks("text") if "run-0002" in body]
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=environment, check=False
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert lines[-2:] == printed.splitlines()[-2:]  # the verdict (valid, the same events) and its departures
    summary = printed.splitlines()[-3]
    assert summary in lines, lines  # runs, batches, records, deliveries again, commits
