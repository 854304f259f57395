"""Record what a Spark Structured Streaming query does with a keyed log, for judging its replays (spec/streaming.md).

A user adds three calls to a query that reads a keyed log and processes it per key, and nothing else changes:

    capture = Capture("capture/", checkpoint="checkpoint/")
    capture.begin(spark)
    records = capture.source(spark.readStream...load())                 # the log's records: publishes
    results = records.groupBy("key").applyInPandasWithState(capture.per_key(update), ...)  # deliveries
    query = results.writeStream.foreachBatch(capture.sink(write)) \\
        .option("checkpointLocation", capture.checkpoint).start()         # acks, the checkpoint's commits
    ...
    capture.end()                                                         # a clean stop (quiescent)
    # or, when the query raised: capture.fail(error)                      # not a clean stop

Every call passes the data through unchanged and appends JSON lines to files of its own under the capture
folder: the driver's (`run-NNNN/driver.jsonl`: runs, batches, sink returns, the checkpoint's commit log)
and each task's (`run-NNNN/tasks/`: the offsets and keys a task read, the offsets its per-key function
produced, in order). Files are flushed after every write, so a process killed with SIGKILL loses only the
line it was writing. `ks_spark.capture.streamtrace` turns the folder into a trace of the format of spec/trace.md.
The folder must be reachable from the executors (local mode, or a shared file system).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from ks_spec.errors import UserError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

MARKER = "capture.json"
"""The file that makes a folder a capture folder: its format, version and column names."""
FORMAT = "keyshared-stream-capture"
VERSION = 1
BATCH_PROPERTY = "keyshared.capture.batch"
"""The Spark local property the sink wrapper sets to the batch id, so tasks of the batch's jobs know it."""
SPARK_BATCH_PROPERTY = "streaming.sql.batchId"
SOURCE, OUTPUT = "src", "out"
"""Task file kinds: the records a task read from the source, and the offsets its per-key function produced."""
FILE_COLUMN = "__keyshared_source_file"
"""The column `Capture.source` adds for the tasks' recorder (a file source's `_metadata.file_path`) and drops again."""

F = TypeVar("F", bound=Callable[..., Any])


def committed_batches(checkpoint: str | None) -> list[int]:
    """The batch ids in a local checkpoint's commit log (`commits/N`), sorted; none when there is no checkpoint.

    Only the entries Spark keeps (spark.sql.streaming.minBatchesToRetain, 100 by default): the highest is the
    last committed batch, and every earlier batch of the checkpoint is committed too (streamtrace reads it so).
    """
    if checkpoint is None:
        return []
    folder = Path(checkpoint.removeprefix("file:")) / "commits"
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


class Capture:
    """The capture of one query's runs in one folder; a new `Capture` on the same folder is the next run (a restart).

    `offset_column` and `key_column` name the log's offset (dense: 0, 1, 2, ...) and routing key in the
    source records and the offset in the per-key function's output (one row per record processed).
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        checkpoint: str | None = None,
        offset_column: str = "offset",
        key_column: str = "key",
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.checkpoint = checkpoint
        self.offset_column = offset_column
        self.key_column = key_column
        self.on_batch = on_batch
        self.run_dir: Path | None = None
        self._driver: IO[str] | None = None
        self._session: SparkSession | None = None

    def begin(self, session: SparkSession) -> Path:
        """Start a run: the first in an empty folder, else a restart. Returns the run's folder.

        In local mode, first checks that Spark's worker Python can import the capture (its tasks run there):
        a one-line error saying how to set it otherwise, rather than a job dying with ModuleNotFoundError.
        """
        check_worker_python(session)
        self.folder.mkdir(parents=True, exist_ok=True)
        marker = self.folder / MARKER
        settings = {
            "format": FORMAT,
            "version": VERSION,
            "offset_column": self.offset_column,
            "key_column": self.key_column,
        }
        if marker.exists():
            stored = _read_marker(self.folder)
            if stored.get("offset_column") != self.offset_column or stored.get("key_column") != self.key_column:
                raise UserError(f"{marker}: the capture was made with other column names: {stored}", exit_code=64)
        else:
            marker.write_text(json.dumps(settings) + "\n")
        index = len([p for p in self.folder.glob("run-*") if p.is_dir()]) + 1
        while True:  # mkdir is atomic: a run begun at the same moment (the query started twice) takes the next
            self.run_dir = self.folder / f"run-{index:04d}"
            try:
                self.run_dir.mkdir()
                break
            except FileExistsError:
                index += 1
        (self.run_dir / "tasks").mkdir()
        self._driver = open(self.run_dir / "driver.jsonl", "a", encoding="utf-8")
        self._session = session
        partitions = session.conf.get("spark.sql.shuffle.partitions")
        self._note({"e": "start", "time": time.time(), "partitions": int(partitions or 0), **self._committed()})
        return self.run_dir

    def end(self, probe: dict[int, int] | None = None) -> None:
        """End the run cleanly (the query stopped after processing everything): the trace's `quiescent`.

        `probe`, when given, counts how many times the sink's durable output holds each offset's result:
        a count above one shows a replay that applied a record again (spec/streaming.md, section 4).
        """
        if probe is not None:
            counts = {str(offset): count for offset, count in sorted(probe.items())}
            self._write_json(self._run() / "probe.json", {"counts": counts})
        self._note({"e": "stop", "time": time.time(), **self._committed()})
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    def fail(self, error: BaseException | str) -> None:
        """End the run on a failure of the query (what to call instead of `end` when it raised): not a clean stop.

        The trace treats the run as killed (no `quiescent`: liveness is judged only after a clean end); the failure's
        time bounds the run, so a run that overlapped it is named concurrent (spec/streaming.md, section 2).
        """
        text = str(error).strip().splitlines()
        self._note({"e": "fail", "time": time.time(), "error": text[0][:500] if text else type(error).__name__})
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    def source(self, frame: DataFrame) -> DataFrame:
        """The source records, unchanged; each task notes the (offset, key) of every record it reads, and the file it
        came from when the source is a file source (its `_metadata.file_path`; other sources: the offsets only)."""
        missing = [name for name in (self.offset_column, self.key_column) if name not in frame.columns]
        if missing:
            raise UserError(
                f"capture.source: no column {', '.join(map(repr, missing))} in the source (columns: "
                f"{', '.join(frame.columns)}); name the offset and key columns with Capture(offset_column=..., "
                "key_column=...)",
                exit_code=64,
            )
        path = _file_path_column(frame)
        named = frame if path is None else frame.select("*", path.alias(FILE_COLUMN))
        files = path is not None  # the task function below must not hold the Column (it is not picklable)
        record = _task_recorder(
            self._run(), SOURCE, self.offset_column, self.key_column, FILE_COLUMN if files else None
        )

        def tap(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                record(batch)
                yield batch.drop_columns([FILE_COLUMN]) if files else batch

        return named.mapInArrow(tap, frame.schema)

    def per_key(self, function: F) -> F:
        """The per-key function, unchanged (same signature, same output); each output row's offset is noted, in order.

        The output must carry the offset of the record each row comes from, one row per record processed,
        in the order the function processed them: that order is the order of the trace's deliveries.
        """
        record = _task_recorder(self._run(), OUTPUT, self.offset_column, None)
        import pandas as pd

        @functools.wraps(function)
        def wrapped(*args: Any) -> Any:
            result = function(*args)
            if isinstance(result, pd.DataFrame):
                record(result)
                return result
            return _recorded(result, record)

        return wrapped  # type: ignore[return-value]

    def sink(self, function: Callable[[DataFrame, int], None]) -> Callable[[DataFrame, int], None]:
        """The foreachBatch function, unchanged; notes the batch's start and the sink's return (the batch's acks)."""

        @functools.wraps(function)
        def wrapped(frame: DataFrame, batch_id: int) -> None:
            frame.sparkSession.sparkContext.setLocalProperty(BATCH_PROPERTY, str(batch_id))
            self._note({"e": "batch", "b": int(batch_id), "time": time.time(), **self._committed()})
            if self.on_batch is not None:
                self.on_batch(int(batch_id))
            function(frame, batch_id)
            self._note({"e": "sink", "b": int(batch_id), "time": time.time()})

        return wrapped

    def _committed(self) -> dict[str, list[int]]:
        return {"committed": committed_batches(self.checkpoint)}

    def _run(self) -> Path:
        if self.run_dir is None:
            raise UserError("capture: call Capture.begin(spark) before building the query", exit_code=64)
        return self.run_dir

    def _note(self, line: dict[str, Any]) -> None:
        if self._driver is None:
            raise UserError("capture: the run has not begun or has ended (Capture.begin / Capture.end)", exit_code=64)
        self._driver.write(json.dumps(line) + "\n")
        self._driver.flush()

    @staticmethod
    def _write_json(path: Path, value: Any) -> None:
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps(value) + "\n")
        os.replace(temporary, path)


def _read_marker(folder: Path) -> dict[str, Any]:
    """The capture folder's settings, or a one-line error naming the file."""
    marker = folder / MARKER
    try:
        stored = json.loads(marker.read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"{marker}: not a capture marker ({error})") from None
    if not isinstance(stored, dict) or stored.get("format") != FORMAT or stored.get("version") != VERSION:
        raise UserError(f"{marker}: not a version {VERSION} {FORMAT} marker")
    return stored


def _file_path_column(frame: DataFrame) -> Any:
    """The column of each record's source file (a file source's hidden `_metadata.file_path`), or None for a source
    without files (rate, Kafka, a socket): there the capture names a record by its batch's offset range."""
    from pyspark.errors import AnalysisException

    try:
        return frame.metadataColumn("_metadata").getField("file_path")
    except (AnalysisException, AttributeError):
        return None


def _recorded(frames: Any, record: Callable[[Any], None]) -> Iterator[Any]:
    for frame in frames:
        record(frame)
        yield frame


def _task_recorder(
    run_dir: Path, kind: str, offset_column: str, key_column: str | None, file_column: str | None = None
) -> Callable[[Any], None]:
    """A function, run in tasks, appending the offsets (and keys) of an Arrow batch or pandas frame to the task's file.

    One file per task attempt, named by batch, partition and attempt; a Python worker keeps its current file open.
    With `file_column`, a line `{"file": path}` precedes the records of each source file (when the file changes).
    """
    tasks = str(run_dir / "tasks")
    handles: dict[str, IO[str]] = {}
    current: dict[str, Any] = {}

    def record(data: Any) -> None:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            return
        batch = context.getLocalProperty(BATCH_PROPERTY) or context.getLocalProperty(SPARK_BATCH_PROPERTY) or "x"
        name = f"{kind}-b{batch}-p{context.partitionId()}-a{context.attemptNumber()}-t{context.taskAttemptId()}.jsonl"
        handle = handles.get(name)
        if handle is None:
            for old in handles.values():
                old.close()
            handles.clear()
            current.clear()
            handle = handles[name] = open(os.path.join(tasks, name), "a", encoding="utf-8")
        offsets = _column(data, offset_column)
        if key_column is None:
            lines = [f"{offset}\n" for offset in offsets]
        else:
            files = _column(data, file_column) if file_column is not None else [None] * len(offsets)
            lines = []
            for offset, key, file in zip(offsets, _column(data, key_column), files, strict=True):
                if file is not None and file != current.get("file"):
                    current["file"] = file
                    lines.append(json.dumps({"file": file}) + "\n")
                lines.append(json.dumps([offset, key]) + "\n")
        handle.write("".join(lines))
        handle.flush()

    return record


def _column(data: Any, name: str) -> list[Any]:
    """A column of an Arrow record batch or a pandas frame as a Python list; a one-line error when it is missing."""
    import pyarrow as pa

    arrow = isinstance(data, pa.RecordBatch)
    names = list(data.schema.names) if arrow else list(data.columns)
    if name not in names:
        raise UserError(f"capture: column '{name}' is missing (columns: {', '.join(map(str, names))})", exit_code=64)
    values: list[Any] = data.column(name).to_pylist() if arrow else data[name].tolist()
    return values


def check_worker_python(session: SparkSession) -> None:
    """In local mode, that the worker Python (PYSPARK_PYTHON, else `python3`) imports ks_spark; a one-line error if not.

    Spark runs the capture's task functions in its worker Python, fixed when the SparkContext started. On a
    cluster the executors' Python cannot be tried from here: it must have keyshared installed (spec/streaming.md).
    """
    context = session.sparkContext
    executable = getattr(context, "pythonExec", None)
    if not executable or not str(context.master).startswith("local") or executable == sys.executable:
        return
    fix = f"set PYSPARK_PYTHON={sys.executable} before the SparkSession starts, or install keyshared into that Python"
    try:
        tried = subprocess.run(
            [executable, "-c", "import ks_spark.capture.recorder"], capture_output=True, text=True, timeout=120
        )
    except OSError as error:
        raise UserError(
            f"capture: Spark's worker Python {executable!r} cannot run ({error.strerror}): {fix}", exit_code=64
        ) from None
    if tried.returncode != 0:
        lines = tried.stderr.strip().splitlines()
        raise UserError(
            f"capture: Spark's worker Python {executable!r} cannot import the capture "
            f"({lines[-1] if lines else f'exit {tried.returncode}'}), so its tasks would fail: {fix}",
            exit_code=64,
        )


class NoCapture(Capture):
    """The same calls, recording nothing: a query built with it runs exactly as without capture (benchmarks)."""

    def __init__(self, checkpoint: str | None = None) -> None:
        super().__init__(".", checkpoint)

    def begin(self, session: SparkSession) -> Path:
        """Nothing to start."""
        return self.folder

    def end(self, probe: dict[int, int] | None = None) -> None:
        """Nothing to end."""

    def fail(self, error: BaseException | str) -> None:
        """Nothing to end."""

    def source(self, frame: DataFrame) -> DataFrame:
        """The frame itself."""
        return frame

    def per_key(self, function: F) -> F:
        """The function itself."""
        return function

    def sink(self, function: Callable[[DataFrame, int], None]) -> Callable[[DataFrame, int], None]:
        """The function itself."""
        return function


def probe_counts(frame: DataFrame, offset_column: str = "offset") -> dict[int, int]:
    """How many rows of a sink's durable output carry each offset (for `Capture.end(probe=...)`)."""
    rows = frame.groupBy(offset_column).count().collect()
    return {int(row[0]): int(row[1]) for row in rows if row[0] is not None}
