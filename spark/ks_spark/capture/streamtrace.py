"""Turn a capture folder (ks_spark.capture) into a trace of spec/trace.md, by the mapping of spec/streaming.md.

Pure Python (no Spark): the capture's files are small beside the query's data (one short line per record
read and per record processed). Per micro-batch of a run, in this order: a `tick`; the `publish` of every
new offset up to the batch's highest; per shuffle partition that processed records, `consumer_added`
(named `b<batch>-p<partition>`, its capacity the records it took) and its `deliver` events in the order its
per-key function produced them; when the sink returned, an `ack` per delivery and `consumer_removed`;
when the checkpoint's commit log holds the batch, a `tick` whose `cursor_persisted` is the first offset
the committed batches' source records do not cover. A later run starts with `restart`; a clean end
adds `quiescent`.

Long because the mapping is one pass with one state (runs, batches, retention of the commit log, the probe's
losses, concurrent runs, each record's place in the job) that reads best in one file beside spec/streaming.md.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ks_spec.errors import MissingInput, UserError

from ks_spark.capture.recorder import MARKER, OUTPUT, SOURCE, _read_marker

Event = dict[str, Any]
UNREAD_KEY = "(unread)"
"""The key of a record no task read: a batch ran (the driver saw it) without reading its records."""
IMPLEMENTATION = {"name": "spark-structured-streaming (ks_spark.capture)", "version": "1"}


@dataclass
class Execution:
    """One execution of a micro-batch in one run: the records its source read, what each partition produced."""

    run: int
    batch: int
    sources: dict[int, str] = field(default_factory=dict)
    files: dict[int, str] = field(default_factory=dict)
    """Per offset read, the source file it came from, as the source names it (a file source only)."""
    deliveries: dict[int, list[int]] = field(default_factory=dict)
    sink_returned: bool = False
    emitted: bool = False
    committed: bool = False
    durable: bool = False
    unapplied: set[int] = field(default_factory=set)
    """Offsets it processed that the sink's durable output does not hold (the probe counts them 0): no ack."""


@dataclass
class Run:
    """One run of the query (one `Capture.begin`): its driver lines and its batches' executions."""

    index: int
    folder: Path
    lines: list[Any]
    executions: dict[int, Execution]
    probe: dict[int, int] | None = None

    @property
    def stopped(self) -> bool:
        """The run ended cleanly (Capture.end)."""
        return any(line.get("e") == "stop" for line in self.lines)


@dataclass
class Summary:
    """What a capture holds: runs, batches, records read and processed."""

    runs: int = 0
    batches: int = 0
    published: int = 0
    deliveries: int = 0
    redeliveries: int = 0
    """Deliveries of an offset delivered before, in this run or an earlier one."""
    commits: int = 0
    clean_end: bool = False
    places: dict[int, list[str]] = field(default_factory=dict)
    """Per offset, where the job read and processed it, in the job's terms (`where`)."""
    concurrent: list[str] = field(default_factory=list)
    """Runs of the query that ran at the same time (one began before another's last driver line), each named:
    not a restart but two queries on one checkpoint, which the trace can only show as a restart."""


def consumer_name(batch: int, partition: int) -> str:
    """The consumer of shuffle partition `partition`'s task in micro-batch `batch`: `b<batch>-p<partition>`, so
    that every explanation naming a consumer names the batch and the partition as Spark numbers them."""
    return f"b{batch}-p{partition}"


def is_capture(path: Path) -> bool:
    """True when `path` is a capture folder (it holds capture.json)."""
    return path.is_dir() and (path / MARKER).is_file()


def load_runs(folder: Path) -> list[Run]:
    """Every run of a capture folder, in order; a one-line error when the folder is not a capture."""
    if not folder.exists():
        raise MissingInput(f"{folder}: no such file or folder")
    if not is_capture(folder):
        raise UserError(f"{folder}: not a capture folder (no {MARKER}; see spec/streaming.md)", exit_code=66)
    _read_marker(folder)
    runs = []
    for index, run_dir in enumerate(sorted(p for p in folder.glob("run-*") if p.is_dir())):
        lines = _json_lines(run_dir / "driver.jsonl")
        executions = _executions(index, run_dir / "tasks")
        probe = None
        if (run_dir / "probe.json").exists():
            try:
                raw = json.loads((run_dir / "probe.json").read_text())["counts"]
                probe = {int(offset): int(count) for offset, count in raw.items()}
            except (ValueError, KeyError, TypeError) as error:
                raise UserError(f"{run_dir / 'probe.json'}: not a probe ({error})") from None
        runs.append(Run(index, run_dir, lines, executions, probe))
    if not runs:
        raise UserError(f"{folder}: the capture holds no run (nothing called Capture.begin)", exit_code=66)
    return runs


def _json_lines(path: Path) -> list[Any]:
    """The complete JSON lines of a file; a last line cut short by a killed process is left out."""
    if not path.exists():
        return []
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not text.endswith("\n"):
            break
        try:
            lines.append(json.loads(text))
        except ValueError:
            break
    return lines


def _executions(run: int, tasks: Path) -> dict[int, Execution]:
    """The run's batch executions from its task files; per (kind, batch, partition), only the last task attempt."""
    chosen: dict[tuple[str, int, int], tuple[int, list[Path]]] = {}
    for path in sorted(tasks.glob("*.jsonl")) if tasks.is_dir() else []:
        parts = path.stem.split("-")  # kind, b<batch>, p<partition>, a<attempt>, t<task>
        if len(parts) != 5 or not parts[1][1:].isdigit():
            continue  # a task outside any batch (no batch id): not part of the stream
        kind, batch, partition, attempt = parts[0], int(parts[1][1:]), int(parts[2][1:]), int(parts[3][1:])
        task = (kind, batch, partition)
        best = chosen.get(task)
        if best is None or attempt > best[0]:
            chosen[task] = (attempt, [path])
        elif attempt == best[0]:
            best[1].append(path)
    executions: dict[int, Execution] = {}
    for (kind, batch, partition), (_, paths) in sorted(chosen.items()):
        execution = executions.setdefault(batch, Execution(run, batch))
        for path in paths:
            file = None
            for line in _json_lines(path):
                if kind == SOURCE and isinstance(line, dict):
                    file = str(line.get("file"))  # the records that follow came from this file
                elif kind == SOURCE:
                    offset, key = line
                    execution.sources[int(offset)] = str(key)
                    if file is not None:
                        execution.files[int(offset)] = file
                elif kind == OUTPUT:
                    execution.deliveries.setdefault(partition, []).append(int(line))
    return executions


class _Builder:
    """Appends events with their seq and tick, and keeps the per-offset state the mapping needs."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.tick = 0

    def add(self, event: str, **columns: Any) -> None:
        if event == "tick":
            self.tick += 1
        self.events.append({"seq": len(self.events), "tick": self.tick, "event": event, **columns})


def assemble(folder: Path) -> tuple[list[Event], Summary]:
    """The trace of a capture folder, and a summary of it."""
    runs = load_runs(folder)
    keys: dict[int, str] = {}
    for run in runs:
        for execution in run.executions.values():
            for offset, key in execution.sources.items():
                if keys.setdefault(offset, key) != key:
                    raise UserError(
                        f"{run.folder}: offset {offset} was read with two keys, {keys[offset]!r} and {key!r}"
                    )
    unread = _unread(runs, keys)
    keys.update(dict.fromkeys(unread, UNREAD_KEY))
    probed = next((run for run in reversed(runs) if run.probe is not None), None)
    probe = probed.probe if probed is not None else None
    _mark_durable(runs, probe)
    if probed is not None and probed.probe is not None:
        _mark_unapplied(runs[: probed.index + 1], probed.probe)
    window = max(1, len(keys))
    config = {
        "profile": "owner",
        "selector": "ring",
        "window": window,
        "persist_interval": 1,
        "persist_ack_holes": True,
    }
    build = _Builder()
    detail = {"trace_version": 1, "config": config, "implementation": IMPLEMENTATION}
    build.add("config", detail=json.dumps(detail, sort_keys=True))
    state = _State(build, keys)
    state.unread = unread
    summary = Summary(runs=len(runs))
    played = [run for run in runs if not _died_at_start(run)] or runs[:1]
    for previous, run in zip([None, *played], played, strict=False):
        if previous is not None:
            state.commit_known(_first_commit_log(run))
            state.end_run(previous)
            build.add("restart")
            state.restart()
        for line in run.lines:
            kind = line.get("e")
            if "committed" in line:
                state.commit_known(line)
            if kind == "batch" and int(line["b"]) in run.executions:
                state.start_batch(run.executions[int(line["b"])])
            elif kind == "sink" and int(line["b"]) in run.executions:
                state.sink_returned(run.executions[int(line["b"])])
        for batch in sorted(run.executions):  # tasks whose batch the driver never noted (it died first)
            if not run.executions[batch].emitted:
                state.start_batch(run.executions[batch])
    last = played[-1]
    if last.stopped:
        state.end_run(last)
        state.await_more(window)
        build.add("quiescent")
        summary.clean_end = True
    summary.concurrent = concurrent_runs(runs)
    summary.places = _places(runs, unread)
    summary.batches = sum(len(run.executions) for run in runs)
    summary.published = state.published
    summary.deliveries = state.deliveries
    summary.redeliveries = state.redeliveries
    summary.commits = state.commits
    return build.events, summary


def _read_nothing(runs: list[Run]) -> list[str]:
    """The batches the driver started whose tasks read no record ("run R batch B")."""
    found = []
    for run in runs:
        for line in run.lines:
            if line.get("e") == "batch":
                execution = run.executions.get(int(line["b"]))
                if execution is None or not execution.sources:
                    found.append(f"run {run.index + 1} batch {int(line['b'])}")
    return found


def _unread(runs: list[Run], keys: dict[int, str]) -> set[int]:
    """The offsets below the highest read that no task read, when a batch ran without reading: its records.

    Without such a batch a gap is the log's own (its offsets are not dense): the one-line error of publish.
    """
    missing = set(range(max(keys, default=-1) + 1)) - set(keys)
    return missing if missing and _read_nothing(runs) else set()


def concurrent_runs(runs: list[Run]) -> list[str]:
    """Pairs of runs that overlapped in time: a later run began before an earlier one's last driver line.

    A restart begins after the run before it stopped or died; a run that began while another still wrote is
    the same query started twice on one checkpoint (two jobs, or a retry scheduled while the first still runs).
    """
    found = []
    for later in runs[1:]:
        began = next((float(line["time"]) for line in later.lines if "time" in line), None)
        if began is None:
            continue
        for earlier in runs[: later.index]:
            last = max((float(line["time"]) for line in earlier.lines if "time" in line), default=None)
            if last is not None and began < last:
                found.append(
                    f"run {earlier.index + 1} ({earlier.folder.name}) and run {later.index + 1} ({later.folder.name}) "
                    f"of one query ran at the same time: run {later.index + 1} began {last - began:.1f}s before "
                    f"run {earlier.index + 1}'s last batch event (the trace shows it as a restart)"
                )
    return found


def _places(runs: list[Run], unread: set[int]) -> dict[int, list[str]]:
    """Per offset, each read and processing of it, as the user knows them: "read in run R batch B from FILE (offsets
    ...)" (the offsets the batch read from that file; without files, the batch's), "processed in run R batch B
    partition P", or "never processed"."""
    places: dict[int, list[str]] = {offset: ["never read (a batch ran without reading it)"] for offset in unread}
    names = _file_names({file for run in runs for e in run.executions.values() for file in e.files.values()})
    for run in runs:
        for batch in sorted(run.executions):
            execution = run.executions[batch]
            read_from: dict[str | None, list[int]] = {}
            for offset in execution.sources:
                read_from.setdefault(execution.files.get(offset), []).append(offset)
            for file, offsets in read_from.items():
                origin = "" if file is None else f" from {names[file]}"
                text = f"read in run {run.index + 1} batch {batch}{origin} (offsets {_spans(offsets)})"
                for offset in offsets:
                    places.setdefault(offset, []).append(text)
            for partition, offsets in sorted(execution.deliveries.items()):
                for offset in offsets:
                    places.setdefault(offset, []).append(
                        f"processed in run {run.index + 1} batch {batch} partition {partition}"
                    )
    for offset, lines in places.items():
        if offset not in unread and not any(line.startswith("processed") for line in lines):
            lines.append("never processed")
    return places


def _file_names(files: set[str]) -> dict[str, str]:
    """Source files as the user knows them: the path below the folder that holds them all, with that folder's name
    (`log/part-00003.jsonl`, `log/date=2026-01-02/part-0.json`); a file of another file system in full."""
    located = {}
    for file in files:
        parts = urlsplit(file)
        path = unquote(parts.path) if parts.scheme in ("", "file") else parts.path
        located[file] = (parts.scheme, parts.netloc, path)
    if len({(scheme, netloc) for scheme, netloc, _ in located.values()}) != 1:
        return {file: file for file in files}
    folders = {posixpath.dirname(path) for _, _, path in located.values()}
    try:
        base = posixpath.dirname(posixpath.commonpath(sorted(folders)))
    except ValueError:  # absolute and relative paths mixed
        return {file: file for file in files}
    return {file: posixpath.relpath(path, base) if base else path for file, (_, _, path) in located.items()}


def _spans(offsets: Iterable[int], most: int = 3) -> str:
    """Offsets as ranges, "6-11, 14" (the first `most`, then how many more)."""
    ranges = _ranges(sorted(set(offsets)))
    shown = [f"{lo}-{hi}" if hi > lo else f"{lo}" for lo, hi in ranges[:most]]
    more = f" and {len(ranges) - most} more ranges" if len(ranges) > most else ""
    return ", ".join(shown) + more


def where(summary: Summary, offsets: Iterable[int]) -> list[str]:
    """For an anomaly's offsets (its witness events'), one line each in the job's terms: "offset 6: read in run 1
    batch 1 from log/part-00001.jsonl (offsets 6-11), processed in run 1 batch 1 partition 0" (what a streaming
    trace's explanation can add: the file, or for a source without files the batch's offsets)."""
    return [f"offset {o}: {', '.join(summary.places.get(o, ['not in the capture']))}" for o in sorted(set(offsets))]


def _died_at_start(run: Run) -> bool:
    """A run that began and ended without a batch or a clean stop (its query failed to start: Spark refuses a second
    query on a checkpoint in use, say): it changed nothing, and is no restart in the trace."""
    return not run.executions and not run.stopped and not any(line.get("e") == "batch" for line in run.lines)


def _first_commit_log(run: Run) -> dict[str, Any]:
    """The run's first view of the checkpoint's commit log (its driver line), or an empty log."""
    for line in run.lines:
        if "committed" in line:
            return dict(line)
    return {"committed": []}


def _mark_durable(runs: list[Run], probe: dict[int, int] | None) -> None:
    """Executions whose sink output survived a later re-application: the probe counts an offset's result more than once.

    Of the executions that processed such an offset, all but the last applied it durably, and with it
    every record they processed (spec/streaming.md, section 4).
    """
    if not probe:
        return
    by_offset: dict[int, list[Execution]] = {}
    for run in runs:
        for batch in sorted(run.executions):
            execution = run.executions[batch]
            for offsets in execution.deliveries.values():
                for offset in offsets:
                    by_offset.setdefault(offset, []).append(execution)
    for offset, count in probe.items():
        executions = by_offset.get(offset, [])
        for execution in executions[: max(0, min(count, len(executions)) - 1)]:
            execution.durable = True


def _mark_unapplied(runs: list[Run], probe: dict[int, int]) -> None:
    """Offsets a sink returned for but whose result its durable output does not hold (the probe counts them 0).

    Their deliveries are not acknowledged: the sink did not apply them, and a commit of their batch passes
    them unprocessed (`cursor-skip`), the holder's leave leaves them `lost`. Only the runs the probe saw
    (up to the run that took it) are judged: a later run's output is not in it.
    """
    for run in runs:
        for execution in run.executions.values():
            for offsets in execution.deliveries.values():
                execution.unapplied.update(o for o in offsets if probe.get(o, 0) == 0)


class _State:
    """The mapping's running state: what is published, delivered since restart, acked, and committed."""

    def __init__(self, build: _Builder, keys: dict[int, str]) -> None:
        self.build = build
        self.keys = keys
        self.published = 0
        self.since_restart: dict[int, int] = {}
        self.resolved: set[int] = set()
        self.above: set[int] = set()
        """The resolved offsets at or above the persisted cursor (the next persist's holes, kept as they come)."""
        self.checkpoint: dict[int, set[int]] = {}
        self.covered: set[int] = set()
        """The source offsets of the batches in self.checkpoint, kept as they come (rebuilt when it goes back)."""
        self.covered_top = -1
        self.scan = 0
        """The first offset self.covered (with the unread offsets below its top) does not hold."""
        self.top = -1
        """The highest batch id of the commit log last seen (-1: no log)."""
        self.unread: set[int] = set()
        """Offsets no task read (a batch that ran without reading them): published, never delivered."""
        self.persisted_cursor = 0
        self.persisted_holes: set[int] = set()
        self.delivered: set[int] = set()
        self.deliveries = 0
        self.redeliveries = 0
        self.commits = 0
        self.open: list[Execution] = []

    def publish_up_to(self, offset: int, where: Path) -> None:
        while self.published <= offset:
            if self.published not in self.keys:
                raise UserError(
                    f"{where}: offset {self.published} was never read through capture.source, but offset {offset} "
                    "was (the log's offsets must be dense: 0, 1, 2, ...)"
                )
            self.build.add("publish", offset=self.published, key=self.keys[self.published])
            self.published += 1

    def start_batch(self, execution: Execution) -> None:
        """The batch's tick, the publishes it makes visible, each partition joining with its deliveries."""
        execution.emitted = True
        self.build.add("tick")
        where = Path(f"run {execution.run + 1} batch {execution.batch}")
        top = max([*execution.sources, *(o for offsets in execution.deliveries.values() for o in offsets)], default=-1)
        self.publish_up_to(top, where)
        for partition in sorted(execution.deliveries):
            offsets = execution.deliveries[partition]
            if not offsets:
                continue
            consumer = consumer_name(execution.batch, partition)
            self.build.add("consumer_added", consumer=consumer, capacity=len(offsets), filters=[])
            for offset in offsets:
                attempt = self.since_restart.get(offset, 0) + 1
                self.since_restart[offset] = attempt
                self.deliveries += 1
                self.redeliveries += offset in self.delivered
                self.delivered.add(offset)
                self.build.add("deliver", offset=offset, key=self.keys[offset], consumer=consumer, attempt=attempt)
        self.open.append(execution)

    def sink_returned(self, execution: Execution) -> None:
        """The sink applied the batch: an ack per delivery, then each partition leaves."""
        if not execution.emitted:
            self.start_batch(execution)
        execution.sink_returned = True
        self._acks(execution)
        for partition in sorted(execution.deliveries):
            if execution.deliveries[partition]:
                self.build.add("consumer_removed", consumer=consumer_name(execution.batch, partition))
        if execution.durable:
            self._persist()

    def _acks(self, execution: Execution) -> None:
        for partition in sorted(execution.deliveries):
            for offset in execution.deliveries[partition]:
                if offset in execution.unapplied:
                    continue
                self.build.add(
                    "ack", offset=offset, key=self.keys[offset], consumer=consumer_name(execution.batch, partition)
                )
                self.resolved.add(offset)
                if offset >= self.persisted_cursor:
                    self.above.add(offset)

    def commit_known(self, line: dict[str, Any]) -> None:
        """The checkpoint's commit log as a driver line saw it: each newly committed batch persists the cursor.

        Spark commits batches in order and purges the log's old entries (spark.sql.streaming.minBatchesToRetain,
        100 by default), so the log's highest batch id is what it says: that batch and every earlier one of
        this checkpoint are committed, whatever older entries are gone. The checkpoint went back only when
        that highest id went down (the log deleted, a new checkpoint, or an older copy): then the batches it no
        longer covers leave the cursor.
        """
        top = max((int(b) for b in line["committed"]), default=-1)
        if top < self.top:
            for batch in list(self.checkpoint):
                if batch > top:
                    del self.checkpoint[batch]
            self.covered = set().union(*self.checkpoint.values()) if self.checkpoint else set()
            self.covered_top, self.scan = max(self.covered, default=-1), 0
        self.top = top
        for execution in sorted(self.open, key=lambda e: e.batch):
            if execution.batch <= top and not execution.committed:
                execution.committed = True
                self.open.remove(execution)
                self.checkpoint[execution.batch] = set(execution.sources)
                self.covered.update(execution.sources)
                self.covered_top = max(self.covered_top, max(execution.sources, default=-1))
                self.commits += 1
                self._persist()

    def end_run(self, run: Run) -> None:
        """Before a restart or the end: executions that applied durably, their sink's return unnoted, get their acks."""
        for execution in list(self.open):
            if execution.run == run.index and execution.durable and not execution.sink_returned:
                execution.sink_returned = True
                self._acks(execution)
                self._persist()
        self.open = [e for e in self.open if e.run != run.index]

    def await_more(self, window: int) -> None:
        """At a clean end with records unresolved, the stopped query as one idle consumer (`query`, room for all).

        The checks at a quiescent point judge what is left unresolved only while someone could take it; the
        batches' partitions have all left. The stopped query could have: so a record its sink never applied
        reads as `lost`, one never processed as `stuck-key` (spec/streaming.md, section 2).
        """
        if len(self.resolved) < self.published:
            self.build.add("consumer_added", consumer="query", capacity=window, filters=[])

    def _persist(self) -> None:
        """A tick whose phase 6 persists the checkpoint's cursor and, above it, every resolved offset (the holes)."""
        # Spark's commit covers the batch range it planned: the unread offsets below the highest covered too.
        while self.scan in self.covered or (self.scan in self.unread and self.scan < self.covered_top):
            self.scan += 1
        cursor = self.scan
        pool = self.above if cursor >= self.persisted_cursor else self.resolved  # the cursor went back: all
        holes = sorted(o for o in pool if o >= cursor)
        self.build.add("tick")
        self.build.add("cursor_persisted", cursor=cursor, ranges=_ranges(holes))
        self.persisted_cursor, self.persisted_holes = cursor, set(holes)
        self.above = set(holes)

    def restart(self) -> None:
        """A restart: what is above the persisted cursor and not a persisted hole is unresolved again."""
        self.since_restart.clear()
        self.resolved = {o for o in self.resolved if o < self.persisted_cursor or o in self.persisted_holes}
        self.above = set(self.persisted_holes)


def _ranges(offsets: list[int]) -> list[list[int]]:
    """Sorted offsets as inclusive [lo, hi] ranges."""
    ranges: list[list[int]] = []
    for offset in offsets:
        if ranges and ranges[-1][1] == offset - 1:
            ranges[-1][1] = offset
        else:
            ranges.append([offset, offset])
    return ranges


def write(folder: Path, out: Path) -> Summary:
    """Assemble a capture folder's trace and write it to `out` (.jsonl or .parquet); return its summary."""
    from ks_spec.trace import write_trace

    events, summary = assemble(folder)
    write_trace(events, out)
    return summary
