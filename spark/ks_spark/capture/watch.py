"""Run a user's streaming query module under capture until it has processed everything, then stop it cleanly.

A query module defines `start(spark, capture, options) -> StreamingQuery` (building its query with the
capture's `source`, `per_key` and `sink`, and `capture.checkpoint` as checkpoint) and, optionally,
`probe(spark, options) -> {offset: count}`: how many times the sink's durable output holds each offset's
result. Its records' columns are `offset` and `key` unless it names others in `OFFSET_COLUMN` and `KEY_COLUMN`
(module constants: the dense offset, and the routing key the job's state should follow).
`ks_spark.capture.examples.keyed_totals` and `ks_spark.capture.examples.balances` are two.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ks_spec.errors import MissingInput, UserError

from ks_spark.capture.recorder import Capture

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


COLUMNS = (("OFFSET_COLUMN", "offset"), ("KEY_COLUMN", "key"))
"""The module constants that name the source's offset and routing-key columns, and their defaults."""


def _column_name(module: ModuleType, name: str, default: str) -> str:
    """A column name a query module declares (`KEY_COLUMN = "account"`), else the default; a one-line error if bad."""
    value = getattr(module, name, default)
    if not isinstance(value, str) or not value:
        raise UserError(f"{module.__name__}.{name} = {value!r}: must name a column (a non-empty string)", exit_code=64)
    return value


@dataclass
class RunOutcome:
    """One run of a query under capture: its folder, its batches, and whether a probe was taken."""

    run_dir: Path
    batches: int
    probed: bool


def load_module(name: str) -> ModuleType:
    """A query module by import name (`pkg.mod`) or file path (`jobs/my_query.py`); a one-line error otherwise."""
    if name.endswith(".py"):
        path = Path(name)
        if not path.is_file():
            raise MissingInput(f"{path}: no such file")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise UserError(f"{path}: cannot be loaded as a Python module", exit_code=64)
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(path.stem, module)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            raise UserError(f"{name}: no such module ({error})", exit_code=64) from None
    if not callable(getattr(module, "start", None)):
        raise UserError(f"{name}: defines no start(spark, capture, options) function", exit_code=64)
    return module


def run_under_capture(
    session: SparkSession,
    module: ModuleType,
    capture_dir: Path,
    checkpoint: str,
    options: Mapping[str, str],
    on_batch: Callable[[int], None] | None = None,
) -> RunOutcome:
    """One run: begin the capture, start the query, process all available data, stop, probe, end the capture."""
    offset_column, key_column = (_column_name(module, name, default) for name, default in COLUMNS)
    capture = Capture(
        capture_dir, checkpoint=checkpoint, offset_column=offset_column, key_column=key_column, on_batch=on_batch
    )
    batches: list[int] = []

    def seen(batch: int) -> None:
        batches.append(batch)
        if on_batch is not None:
            on_batch(batch)

    capture.on_batch = seen
    run_dir = capture.begin(session)
    try:
        query = module.start(session, capture, dict(options))
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    except BaseException as error:
        capture.fail(error)  # the run's end, not a clean one
        raise
    counts = module.probe(session, dict(options)) if callable(getattr(module, "probe", None)) else None
    capture.end(probe=counts)
    return RunOutcome(run_dir, len(batches), counts is not None)
