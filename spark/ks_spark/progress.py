"""Progress while Spark works: the current stage of a command, and the tasks of Spark's active stages.

A background thread polls the SparkContext's status tracker (a cheap driver-side call) and reports
(description, tasks done, tasks in all) to whatever renders it; the CLI draws a rich progress bar.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Update = Callable[[str, int, int], None]
"""Called with (what is happening, tasks completed, tasks in all; 0 when unknown)."""


class SparkProgress:
    """Polls Spark's active stages and reports them with the description of the current step."""

    def __init__(self, session: SparkSession, update: Update, interval_s: float = 0.25) -> None:
        self.session = session
        self.update = update
        self.interval_s = interval_s
        self.description = "starting"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="ks-spark-progress", daemon=True)

    def stage(self, description: str) -> None:
        """A new step of the command begins."""
        self.description = description
        self.update(description, 0, 0)

    def _poll(self) -> None:
        tracker = self.session.sparkContext.statusTracker()
        while not self._stop.wait(self.interval_s):
            try:
                done = total = 0
                for stage_id in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage_id)
                    if info is not None:
                        done += info.numCompletedTasks
                        total += info.numTasks
            except Exception:  # the context is stopping; progress is best effort
                return
            self.update(self.description, done, total)

    def __enter__(self) -> SparkProgress:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
