"""The capture checks Spark's worker Python before a query runs (local mode): a Python that cannot import the
capture is refused in one line saying how to set it, instead of a job dying with ModuleNotFoundError: ks_spark.
No Spark needed: the session is a stand-in with the two attributes the check reads."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ks_spark.capture.recorder import Capture, check_worker_python
from ks_spec.errors import UserError


def _session(python: str, master: str = "local[2]") -> Any:
    conf = SimpleNamespace(get=lambda name, default=None: "2")
    return SimpleNamespace(sparkContext=SimpleNamespace(pythonExec=python, master=master), conf=conf)


def test_a_worker_python_without_the_capture_is_refused_in_one_line_naming_the_fix(tmp_path: Path) -> None:
    bare = shutil.which("python3", path="/usr/bin:/usr/local/bin:/bin")
    if bare is None or bare == sys.executable:
        pytest.skip("no system python3 apart from this one")
    with pytest.raises(UserError) as caught:
        Capture(tmp_path / "capture").begin(_session(bare))
    message = str(caught.value)
    assert "\n" not in message and caught.value.exit_code == 64
    assert f"worker Python '{bare}' cannot import the capture (ModuleNotFoundError" in message
    assert f"set PYSPARK_PYTHON={sys.executable} before the SparkSession starts" in message
    assert not (tmp_path / "capture").exists()  # refused before anything was written


def test_a_worker_python_that_does_not_exist_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"worker Python '/no/such/python' cannot run \(No such file or directory\)"):
        check_worker_python(_session("/no/such/python"))


def test_the_driver_python_and_a_cluster_are_accepted(tmp_path: Path) -> None:
    check_worker_python(_session(sys.executable))
    check_worker_python(_session("/no/such/python", master="spark://cluster:7077"))  # not tried from the driver
    run = Capture(tmp_path / "capture").begin(_session(sys.executable))
    assert run.name == "run-0001"


def test_fail_ends_a_run_with_the_error_first_line_and_no_clean_stop(tmp_path: Path) -> None:
    import json

    from ks_spark.capture.streamtrace import load_runs

    capture = Capture(tmp_path / "capture")
    capture.begin(_session(sys.executable))
    capture.fail(RuntimeError("[STREAM_FAILED] the query failed\n  at some.java.Frame"))
    lines = [json.loads(line) for line in (tmp_path / "capture" / "run-0001" / "driver.jsonl").read_text().splitlines()]
    assert lines[-1]["e"] == "fail" and lines[-1]["error"] == "[STREAM_FAILED] the query failed"
    assert not load_runs(tmp_path / "capture")[0].stopped
