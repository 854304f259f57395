"""Shared helpers for the Spark tests: one SparkSession for the whole run, traces to judge, faults to inject.

Imported explicitly (`from spark_support import ...`): pytest runs with importlib mode.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_missing() -> str | None:
    """Why Spark tests cannot run here (pyspark or Java missing), or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (make installs the spark extra)"
    from ks_spec.errors import Unavailable
    from ks_spec.java import require_java

    if shutil.which("java") is None and not __import__("os").environ.get("JAVA_HOME"):
        return "Java 17+ is not installed (Spark needs it)"
    try:
        require_java()
    except Unavailable as error:
        return str(error)
    return None


@cache
def _session() -> SparkSession:
    from ks_spark.session import SessionOptions, get_session

    # Small and quick: two cores, loopback, no UI, few shuffle partitions, serial GC, 1g driver (spark.md).
    return get_session(
        SessionOptions(
            master="local[2]",
            app_name="keyshared-tests",
            shuffle_partitions=2,
            driver_memory="1g",
            quick=True,
        )
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one SparkSession of the test run; tests that use it skip where Spark cannot run."""
    reason = spark_missing()
    if reason:
        pytest.skip(reason)
    yield _session()
