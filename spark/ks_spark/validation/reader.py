"""Reading traces (spec/trace.md) into Spark with the format's explicit schema, rejecting corrupt input early.

A trace is a JSON-lines file, a Parquet file, or a folder of Parquet files read in name order. The
Spark schema is derived from `ks_spec.trace.arrow_schema()` (ks_spark.schema), never inferred. Local
Parquet files are checked from their footers before any job runs (missing columns, wrong types,
truncation), so a broken file is named in one line instead of failing deep inside a Spark task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from ks_spec.errors import MissingInput, UserError
from ks_spec.trace import columns, is_parquet, parquet_type_problem

from ks_spark.schema import spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FILE_COLUMN = "_file"
BLOCK_COLUMN = "_block"
ROW_COLUMN = "_row"
CORRUPT_COLUMN = "_corrupt"
REQUIRED_COLUMNS = ("seq", "tick", "event")


@dataclass(frozen=True)
class TraceSource:
    """One trace as the user named it: its files, in reading order, and their format."""

    name: str
    files: tuple[str, ...]
    format: str  # "parquet" or "json"
    rows_per_file: tuple[int, ...] = ()

    @property
    def local(self) -> bool:
        """True for files on this machine (their footers can be checked before Spark runs)."""
        return not _is_url(self.name)


def _is_url(name: str) -> bool:
    return "://" in name and not name.startswith("file://")


def local_path(name: str) -> Path | None:
    """The local file or folder a trace name points at (file:// allowed); None for a URL only Spark can read."""
    return None if _is_url(name) else Path(name.removeprefix("file://"))


def resolve(name: str) -> TraceSource:
    """Find a trace's files and format, and check local Parquet footers; raise UserError naming the file."""
    path = local_path(name)
    if path is None:
        lowered = name.rstrip("/").lower()
        fmt = "json" if lowered.endswith((".jsonl", ".json", ".ndjson")) else "parquet"
        return TraceSource(name, (name,), fmt)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".parquet" and not p.name.startswith((".", "_")))
        if not files:
            raise MissingInput(f"{path}: folder holds no .parquet files")
    elif path.exists():
        files = [path]
    else:
        raise MissingInput(f"{path}: no such file or folder")
    try:
        parquet = [is_parquet(f) for f in files]
    except OSError as error:
        raise MissingInput(f"{files[0]}: cannot be read ({error.strerror})") from None
    if all(parquet):
        rows = tuple(check_parquet_footer(f) for f in files)
        return TraceSource(name, tuple(str(f.resolve()) for f in files), "parquet", rows)
    if len(files) == 1:
        return TraceSource(name, (str(files[0].resolve()),), "json")
    bad = files[parquet.index(False)]
    raise UserError(f"{bad}: not a Parquet file (a trace folder holds only Parquet files)")


def check_parquet_footer(file: Path) -> int:
    """Check one Parquet file's footer against the trace schema; return its row count.

    Catches what Spark would report late and obscurely: truncation, a missing required column, a
    column that is not part of the format, and a column of the wrong type.
    """
    try:
        parquet = pq.ParquetFile(file)
    except (pa.ArrowInvalid, OSError) as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(f"{file}: not a readable Parquet file, truncated or corrupt ({text})") from None
    schema = parquet.schema_arrow
    names = set(schema.names)
    for column in REQUIRED_COLUMNS:
        if column not in names:
            raise UserError(f"{file}: field '{column}': required column is missing")
    unknown = sorted(names - set(columns()))
    if unknown:
        raise UserError(f"{file}: field '{unknown[0]}': not a column of the trace format v1")
    for column in schema.names:
        problem = parquet_type_problem(column, schema.field(column).type)
        if problem:
            raise UserError(f"{file}: {problem}")
    rows: int = parquet.metadata.num_rows
    return rows


def read(session: SparkSession, source: TraceSource) -> DataFrame:
    """The trace as a DataFrame: the format's columns, plus where each row came from (file, split, row)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    schema = spark_schema()
    metadata = [
        F.col("_metadata.file_path").alias(FILE_COLUMN),
        F.col("_metadata.file_block_start").alias(BLOCK_COLUMN),
    ]
    if source.format == "parquet":
        if not source.local:
            _check_remote_parquet_schema(session, source)
        frame = session.read.schema(schema).parquet(*source.files)
        return frame.select(
            *schema.fieldNames(),
            *metadata,
            F.col("_metadata.row_index").alias(ROW_COLUMN),
            F.lit(None).cast("string").alias(CORRUPT_COLUMN),
        )
    # Read as text and parse per line, so that a field the format does not know (which Spark's JSON reader drops
    # silently) marks its line corrupt, as the Python reader refuses it (spec/trace.md section 6).
    with_corrupt = StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType(), True)])
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    # Blank lines (JSON whitespace only) hold no event, as in ks_spec.trace: the Python reader skips them too.
    lines = session.read.text(list(source.files)).where(~F.col("value").rlike("^[ \\t\\r\\n]*$"))
    parsed = lines.select(
        F.from_json(F.col("value"), with_corrupt, options).alias("_event"),
        F.col("value"),
        *metadata,
    )
    known = F.array(*(F.lit(name) for name in schema.fieldNames()))
    unknown = F.size(F.array_except(F.coalesce(F.json_object_keys(F.col("value")), F.array()), known)) > 0
    # A line that is not UTF-8 (Spark's JSON parser would read the bad bytes as U+FFFD) is corrupt too.
    corrupt = (
        F.when(~F.is_valid_utf8(F.col("value")), F.make_valid_utf8(F.col("value")))
        .when(unknown, F.col("value"))
        .otherwise(F.col(f"_event.{CORRUPT_COLUMN}"))
    )
    return parsed.select(
        *(F.col(f"_event.{name}").alias(name) for name in schema.fieldNames()),
        FILE_COLUMN,
        BLOCK_COLUMN,
        F.lit(None).cast("long").alias(ROW_COLUMN),
        corrupt.alias(CORRUPT_COLUMN),
    )


def _check_remote_parquet_schema(session: SparkSession, source: TraceSource) -> None:
    """For files Spark reaches but this process cannot (hdfs://, s3a://): compare the stored schema."""
    expected = {f.name: f.dataType for f in spark_schema().fields}
    try:
        stored = session.read.parquet(source.name).schema
    except Exception as error:
        raise UserError(f"{source.name}: not a readable Parquet trace ({_first_line(error)})") from None
    names = {f.name for f in stored.fields}
    for column in REQUIRED_COLUMNS:
        if column not in names:
            raise UserError(f"{source.name}: field '{column}': required column is missing")
    for stored_field in stored.fields:
        if stored_field.name not in expected:
            raise UserError(f"{source.name}: field '{stored_field.name}': not a column of the trace format v1")
        if stored_field.dataType != expected[stored_field.name]:
            raise UserError(
                f"{source.name}: field '{stored_field.name}': column type {stored_field.dataType.simpleString()}, "
                f"expected {expected[stored_field.name].simpleString()}"
            )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
