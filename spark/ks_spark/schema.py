"""The trace format's Spark schema: what validation reads a trace with and what the dispatcher writes one in.

Derived from the Arrow schema of ks_spec.trace, never inferred, so both sides of ks_spark agree with the
format by construction.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from ks_spec.trace import arrow_schema

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


@cache
def spark_schema() -> StructType:
    """The trace's Spark schema, derived from the Arrow schema of ks_spec.trace (never inferred)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema: StructType = from_arrow_schema(arrow_schema())
    return schema
