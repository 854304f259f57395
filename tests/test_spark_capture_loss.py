"""A real streaming job whose sink swallows a failed write: the batch commits, its output is lost, and the
verdict says so (spec/streaming.md, sections 2 and 4): the probe counts the lost batch's offsets zero, so its
deliveries are not acknowledged, the commit passes them (`cursor-skip`) and they are `lost` at the end.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from spark_support import spark_fixture, spark_missing  # noqa: F401  (spark_fixture: `spark`)

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(spark_missing() is not None, reason=str(spark_missing())),
]

FILES, RECORDS, KEYS = 3, 18, 4


def test_a_sink_that_swallows_a_failed_write_is_judged_as_loss_naming_the_batch_records(
    spark: Any, tmp_path: Path
) -> None:
    from ks_conformance.tracefile import check_trace
    from ks_spark.capture.examples import keyed_totals
    from ks_spark.capture.streamtrace import where, write
    from ks_spark.capture.watch import run_under_capture

    keyed_totals.write_log(tmp_path / "log", RECORDS, KEYS, FILES)
    options = {"log": str(tmp_path / "log"), "out": str(tmp_path / "out"), "variant": "swallow-write"}
    outcome = run_under_capture(spark, keyed_totals, tmp_path / "capture", str(tmp_path / "checkpoint"), options)
    assert outcome.batches == FILES and outcome.probed
    summary = write(tmp_path / "capture", tmp_path / "trace.jsonl")
    result = check_trace(tmp_path / "trace.jsonl")
    assert result.verdict.value == "invalid"
    lost = {int(re.findall(r"offset=(\d+)", a.explanation.text())[0]) for a in result.anomalies if a.name == "lost"}
    per_file = RECORDS // FILES
    batch = keyed_totals.LOST_BATCH
    assert lost == set(range(batch * per_file, (batch + 1) * per_file))  # exactly the swallowed batch's records
    assert any(a.name == "cursor-skip" for a in result.anomalies)
    # In the job's terms: each lost record's batch, and the file the source read it from (issue 31, item 3).
    for line in where(summary, lost):
        assert f" batch {batch} from log/part-{batch:05d}.jsonl " in line
        assert f"processed in run 1 batch {batch} " in line
