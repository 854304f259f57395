"""Benchmark of the Spark replay validator; run `python -m benchmarks.bench_spark` (`--quick` for a one-minute check).

For synthetic valid traces of 10M and 100M events (benchmarks/synthetic_trace.py, cached under --data):
events per second of `ks_spark.validation.validator.validate` on every kind on local[1] and local[2] (the scaling;
in one task, and on two cores in two shards of keys too; sizes up to --every-kind-up-to),
of the Python checker (check_trace's loop), and of pandas and DuckDB baselines doing a far smaller per-key check on the
same Parquet files; the Spark floor (the key events shuffled into Python, unchecked: what the design
costs before it checks anything); the peak memory of the driver, the JVM and Spark's Python workers; the
cores each Spark run kept busy; the validator's stages; and the Spark dispatcher's messages per second.
Every measurement runs in a fresh child process whose memory is sampled every 0.5 s and which is killed
past --limit-gb.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ks_conformance.pacing import peak_rss, vm_hwm
from rich.console import Console
from rich.table import Table

from benchmarks import host, readme

ROOT = Path(__file__).resolve().parent.parent
PAGE = os.sysconf("SC_PAGE_SIZE")
GIB = 2**30
TARGET_RATE = 1_000_000
FLOOR = "Spark floor"
EVERY_KIND = "Spark validator, every kind"
"""How the throughput rows of the validator and of its floor are named (and found again)."""
BASELINE_CHECK = (
    "per key, in file (= seq) order: offsets of first deliveries (attempt 1) increase, and the key's deliveries "
    "and acks alternate (never two messages of a key in flight); nothing else"
)
console = Console(width=140)


# --- sizes, traces, the machine ---------------------------------------------------------------------


def parse_size(text: str) -> int:
    """'10M' -> 10,000,000; '200k' -> 200,000; plain digits as they are."""
    text = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def label(events: int) -> str:
    """10,000,000 -> '10M'."""
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if events >= scale and events % (scale // 10 or 1) == 0:
            return f"{events / scale:g}{unit}"
    return f"{events:,}"


def ensure_trace(data: Path, events: int, seed: int) -> tuple[Path, float | None]:
    """The cached trace of `events` events (generated if missing); the seconds generation took, None if cached."""
    import pyarrow.parquet as pq

    from benchmarks import synthetic_trace

    path = data / f"trace-{events}-seed{seed}.parquet"
    if path.exists():
        try:
            if pq.ParquetFile(path).metadata.num_rows == events:
                return path, None
        except Exception:  # a truncated file from an interrupted run: write it again
            pass
    started = time.perf_counter()
    synthetic_trace.write(path, events, seed)
    return path, time.perf_counter() - started


def machine() -> str:
    """CPU, cores, memory, Python and Java versions."""
    memory = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f", {int(line.split()[1]) / 2**20:.0f} GiB RAM"
    except OSError:
        pass
    java = "no java"
    try:
        shown = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
        java = shown.splitlines()[0] if shown else java
    except OSError:
        pass
    return f"{host.machine()}{memory}, {java}"


def available_gib() -> float:
    """MemAvailable from /proc/meminfo, in GiB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable"):
            return int(line.split()[1]) / 2**20
    return 0.0


# --- children and their memory ----------------------------------------------------------------------


def _processes() -> dict[int, tuple[int, str, int]]:
    """Every process: pid -> (parent pid, command name, RSS bytes)."""
    found: dict[int, tuple[int, str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
            with open(f"/proc/{entry}/statm") as handle:
                rss = int(handle.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        found[int(entry)] = (parent, name, rss)
    return found


@dataclass
class Peaks:
    """Peak RSS seen while a child ran (bytes), by role."""

    driver: int = 0
    jvm: int = 0
    workers: int = 0
    total: int = 0
    killed: bool = False


class Sampler:
    """Samples the RSS of a child process tree every `interval` s; kills the tree past `limit` bytes."""

    def __init__(self, root: int, limit: int, interval: float = 0.5) -> None:
        self.root, self.limit, self.interval = root, limit, interval
        self.peaks = Peaks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self) -> Peaks:
        """Stop sampling; return the peaks."""
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peaks

    def tree(self) -> dict[int, tuple[int, str, int]]:
        """The root and its descendants: pid -> (parent, name, RSS)."""
        table = _processes()
        return {pid: table[pid] for pid in tree_pids(self.root, table)}

    def _run(self) -> None:
        while not self._stop.is_set():
            tree = self.tree()
            jvm_pids = {pid for pid, (_, name, _) in tree.items() if name == "java"}
            driver = tree.get(self.root, (0, "", 0))[2]
            jvm = sum(tree[pid][2] for pid in jvm_pids)
            workers = sum(rss for pid, (parent, name, rss) in tree.items() if pid != self.root and pid not in jvm_pids)
            total = driver + jvm + workers
            peaks = self.peaks
            peaks.driver, peaks.jvm = max(peaks.driver, driver), max(peaks.jvm, jvm)
            peaks.workers, peaks.total = max(peaks.workers, workers), max(peaks.total, total)
            if total > self.limit:
                peaks.killed = True
                for pid in sorted(tree, reverse=True):  # only this child's own tree, by pid
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                return
            self._stop.wait(self.interval)


@dataclass
class ChildResult:
    """What a child printed (its last stdout line, as JSON), its peaks, and how it ended."""

    figures: dict[str, Any] = field(default_factory=dict)
    peaks: Peaks = field(default_factory=Peaks)
    error: str | None = None
    seconds: float = 0.0
    timed_out: bool = False


def run_child(mode: str, options: dict[str, Any], limit: int, timeout: float | None = None) -> ChildResult:
    """Run one measurement in a fresh process (`--child MODE`), sampling its memory; never raise."""
    command = [sys.executable, "-m", "benchmarks.bench_spark", "--child", mode, "--child-options", json.dumps(options)]
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err, text=True)
        sampler = Sampler(process.pid, limit)
        sampler.start()
        timed_out = False
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            for pid in sorted(sampler.tree(), reverse=True):  # the child and what it started, by pid
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
        peaks = sampler.stop()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    result = ChildResult(peaks=peaks, seconds=time.perf_counter() - started, timed_out=timed_out)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if process.returncode == 0 and lines:
        result.figures = json.loads(lines[-1])
    elif timed_out:
        result.error = f"timed out after {result.seconds:.0f}s"
    elif peaks.killed:
        result.error = f"killed: its processes passed {limit / GIB:.0f} GiB RSS"
    else:
        tail = [line for line in stderr.splitlines() if line.strip()][-3:]
        result.error = f"exit {process.returncode}: " + " | ".join(tail)[-300:]
    return result


def tree_pids(root: int, table: dict[int, tuple[int, str, int]] | None = None) -> list[int]:
    """`root` and every process descended from it that is alive now (in `table`, default: read /proc)."""
    table = table if table is not None else _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root] if root in table else []
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system) used so far by `root` (default: this process), its descendants, and the
    children they waited for: how many cores a Spark run really kept busy (the JVM and Python workers too)."""
    ticks = 0
    for pid in tree_pids(root if root is not None else os.getpid()):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended meanwhile
        ticks += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


# --- the measurements, each in a child process --------------------------------------------------------


def spark_child(trace: str, master: str, driver_memory: str | None, shards: int = 1) -> dict[str, Any]:
    """Start a session on `master`, validate the trace once (every kind, by the Python checker in `shards` shards of
    keys; 1: in one task), report times, stages and the JVM's VmHWM."""
    from ks_spark.session import SessionOptions, get_session
    from ks_spark.validation.validator import validate

    started = time.perf_counter()
    session = get_session(SessionOptions(master=master, driver_memory=driver_memory))
    startup = time.perf_counter() - started
    marks: list[tuple[str, float]] = []
    cpu_before = tree_cpu_seconds()
    result = validate(
        session,
        trace,
        stage=lambda description: marks.append((description, time.perf_counter())),
        shards=shards,
    )
    finished = time.perf_counter()
    cpu = tree_cpu_seconds() - cpu_before
    stages = []
    for index, (description, at) in enumerate(marks):
        until = marks[index + 1][1] if index + 1 < len(marks) else finished
        stages.append((description.split(" (")[0], until - at))
    gateway = getattr(session.sparkContext, "_gateway", None)
    process = getattr(gateway, "proc", None)
    jvm = vm_hwm(process.pid) if process is not None else 0
    session.stop()
    return {
        "events": result.events,
        "verdict": result.verdict.value,
        "anomalies": result.total,
        "malformed": result.malformed,
        "startup_s": startup,
        "seconds": result.seconds,
        "stages": stages,
        "cpu_s": cpu,
        "jvm_hwm": jvm,
        "driver_hwm": peak_rss(),
        "judged": result.judged,
    }


FLOOR_EVENTS = (
    "publish",
    "deliver",
    "ack",
    "nack",
    "timeout",
    "drop",
    "dead_letter",
    "filter",
    "outcome",
    "held",
    "key_blocked",
    "key_released",
    "key_skipped",
    "ack_ignored",
    "nack_ignored",
)
"""The events of a key the floor ships (those the retired per-key pass read: the floor stays comparable)."""
FLOOR_COLUMNS = ("key", "seq", "event", "offset", "consumer", "reason", "segment")


def floor_child(trace: str, master: str, driver_memory: str | None) -> dict[str, Any]:
    """What a parallel judge costs before it checks anything: read the trace, shuffle the key events by key, sort
    them by seq, and stream them through a Python task that only counts them."""
    import pyarrow as pa
    from ks_spark.session import SessionOptions, default_parallelism, get_session
    from ks_spark.validation.reader import read, resolve
    from pyspark.sql import functions as F

    def count(batches: Any) -> Any:
        yield pa.RecordBatch.from_pydict({"n": [sum(batch.num_rows for batch in batches)]})

    session = get_session(SessionOptions(master=master, driver_memory=driver_memory))
    events = read(session, resolve(trace))
    partitions = max(1, 4 * default_parallelism(session))
    started = time.perf_counter()
    cpu_before = tree_cpu_seconds()
    keyed = events.where(F.col("event").isin(*FLOOR_EVENTS) & F.col("key").isNotNull()).select(*FLOOR_COLUMNS)
    shipped = (
        keyed.repartition(partitions, "key")
        .sortWithinPartitions("key", "seq")
        .mapInArrow(count, "n long")
        .agg(F.sum("n"))
        .collect()[0][0]
    )
    seconds = time.perf_counter() - started
    cpu = tree_cpu_seconds() - cpu_before
    session.stop()
    return {"shipped": shipped, "seconds": seconds, "cpu_s": cpu, "driver_hwm": peak_rss()}


def python_child(trace: str, budget: float) -> dict[str, Any]:
    """The loop of `ks_conformance.tracefile.check_trace` (schema, sequence rules, Checker.feed), for at most
    `budget` seconds; the steady rate over the last quarter of the run projects the rest."""
    from ks_conformance.checker import Checker
    from ks_spec.trace import SequenceRules, read_events, schema_problem

    checker, rules = Checker(), SequenceRules()
    started = time.perf_counter()
    marks: list[tuple[int, float]] = [(0, 0.0)]
    events, complete, problem = 0, True, None
    for _, event in read_events(Path(trace)):
        problem = schema_problem(event) or rules.check(event)
        if problem:
            break
        checker.feed(event)
        events += 1
        if events % 5000 == 0:
            elapsed = time.perf_counter() - started
            marks.append((events, elapsed))
            if elapsed > budget:
                complete = False
                break
    verdict = None
    if complete and problem is None:
        checker.finish()
        verdict = checker.verdict.value
    seconds = time.perf_counter() - started
    marks.append((events, seconds))
    first = next(m for m in marks if m[1] >= 0.75 * seconds)
    steady = (events - first[0]) / max(1e-9, seconds - first[1]) if events > first[0] else events / seconds
    return {
        "events": events,
        "complete": complete,
        "verdict": verdict,
        "anomalies": len(checker.anomalies),
        "problem": problem,
        "seconds": seconds,
        "rate": events / seconds,
        "steady_rate": steady,
        "driver_hwm": peak_rss(),
    }


def pandas_child(trace: str, runs: int) -> dict[str, Any]:
    """The baseline check with pyarrow + pandas in one process (read included); median of `runs`."""
    import numpy as np
    import pyarrow.parquet as pq

    times, found = [], (0, 0)
    events = pq.ParquetFile(trace).metadata.num_rows
    for _ in range(runs):
        started = time.perf_counter()
        table = pq.read_table(trace, columns=["event", "key", "offset", "attempt"], read_dictionary=["event", "key"])
        frame = table.to_pandas()
        del table
        kinds = frame["event"]
        keyed = frame[kinds.isin(["deliver", "ack"]).to_numpy()]
        del frame
        is_deliver = (keyed["event"] == "deliver").to_numpy()
        codes = keyed["key"].cat.codes.to_numpy()
        step = np.where(is_deliver, 1, -1).astype(np.int8)
        import pandas as pd

        in_flight = pd.Series(step).groupby(codes, sort=False).cumsum().to_numpy()
        overlaps = int(((in_flight > 1) | (in_flight < 0)).sum())
        first = is_deliver & (keyed["attempt"].to_numpy() == 1)
        offsets = pd.Series(keyed["offset"].to_numpy()[first])
        gaps = offsets.groupby(codes[first], sort=False).diff().to_numpy()
        reorders = int((gaps <= 0).sum())
        times.append(time.perf_counter() - started)
        found = (reorders, overlaps)
        del keyed
    seconds = statistics.median(times)
    return {
        "events": events,
        "seconds": seconds,
        "runs": times,
        "reorders": found[0],
        "overlaps": found[1],
        "driver_hwm": peak_rss(),
    }


DUCKDB_QUERY = """
WITH e AS (SELECT seq, event, key, "offset", attempt FROM read_parquet('{trace}') WHERE event IN ('deliver', 'ack')),
firsts AS (
    SELECT "offset" - lag("offset") OVER (PARTITION BY key ORDER BY seq) AS gap
    FROM e WHERE event = 'deliver' AND attempt = 1
),
flight AS (
    SELECT sum(CASE WHEN event = 'deliver' THEN 1 ELSE -1 END)
        OVER (PARTITION BY key ORDER BY seq ROWS UNBOUNDED PRECEDING) AS n
    FROM e
)
SELECT (SELECT count(*) FROM firsts WHERE gap <= 0), (SELECT count(*) FROM flight WHERE n > 1 OR n < 0)
"""


def duckdb_child(trace: str, runs: int, threads: int, memory_limit_gb: int) -> dict[str, Any]:
    """The baseline check as one DuckDB query (window functions over key, seq); median of `runs`."""
    import duckdb
    import pyarrow.parquet as pq

    events = pq.ParquetFile(trace).metadata.num_rows
    times, found = [], (0, 0)
    with tempfile.TemporaryDirectory(prefix="ks-bench-duckdb-", dir=Path(trace).parent) as spill:
        for _ in range(runs):
            connection = duckdb.connect()
            connection.execute(f"SET threads = {threads}")
            connection.execute(f"SET memory_limit = '{memory_limit_gb}GB'")
            connection.execute(f"SET temp_directory = '{spill}'")
            connection.execute("SET preserve_insertion_order = false")
            started = time.perf_counter()
            row = connection.execute(DUCKDB_QUERY.format(trace=trace.replace("'", "''"))).fetchone()
            times.append(time.perf_counter() - started)
            found = (int(row[0]), int(row[1])) if row else (-1, -1)
            connection.close()
    return {
        "events": events,
        "seconds": statistics.median(times),
        "runs": times,
        "reorders": found[0],
        "overlaps": found[1],
        "driver_hwm": peak_rss(),
    }


def dispatcher_child(trace: str, messages: int, master: str) -> dict[str, Any]:
    """Replay the trace's first `messages` publishes and its acks of them through the Spark dispatcher."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from ks_reference.config import Config
    from ks_spark.dispatcher.engine import replay
    from ks_spark.dispatcher.runner import SparkEraRunner
    from ks_spark.session import SessionOptions, get_session

    head = int(3.5 * messages) + 1000  # a message's publish and ack lie within ~3.1 events per message of it
    table = pq.read_table(trace, columns=["event", "offset", "key", "consumer", "capacity", "detail"]).slice(0, head)
    wanted = pc.is_in(table["event"], value_set=pa.array(["config", "consumer_added", "publish", "ack"]))
    rows = table.filter(wanted)
    ops: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    for row in rows.to_pylist():
        kind = row["event"]
        if kind == "config":
            config = json.loads(row["detail"])["config"]
        elif kind == "consumer_added":
            ops.append({"op": "add_consumer", "consumer": row["consumer"], "capacity": row["capacity"], "filters": []})
        elif row["offset"] < messages and kind == "publish":
            ops.append({"op": "publish", "offset": row["offset"], "key": row["key"]})
        elif row["offset"] < messages:
            ops.append({"op": "ack", "consumer": row["consumer"], "offset": row["offset"]})
    session = get_session(SessionOptions(master=master))
    started = time.perf_counter()
    responses = replay(Config.parse(config), ops, SparkEraRunner(session))
    seconds = time.perf_counter() - started
    delivered = sum(1 for r in responses for e in r.get("events", []) if e.get("event") == "deliver")
    refused = sum(1 for r in responses if not r.get("ok", False))
    session.stop()
    return {
        "messages": messages,
        "ops": len(ops),
        "seconds": seconds,
        "delivered": delivered,
        "refused": refused,
        "driver_hwm": peak_rss(),
    }


def logreplay_child(log: str, master: str, lag: int) -> dict[str, Any]:
    """`spark-dispatch` in process: replay the log with 16 consumers acking `lag` publishes after each delivery."""
    import tempfile as temporary

    from ks_spark.dispatcher.walreplay import LogReplay, control_ops_from, replay_log
    from ks_spark.session import SessionOptions, get_session

    session = get_session(SessionOptions(master=master, shuffle_partitions=16))
    consumers = control_ops_from([f"c{n}" for n in range(16)])
    with temporary.TemporaryDirectory(prefix="ks-bench-replay-") as folder:
        started = time.perf_counter()
        summary = replay_log(session, LogReplay(log, profile="owner", lag=lag, controls=consumers), folder + "/trace")
        seconds = time.perf_counter() - started
    session.stop()
    return {
        "messages": summary.messages,
        "events": summary.events,
        "seconds": seconds,
        "deliveries": summary.deliveries,
        "driver_hwm": peak_rss(),
    }


def write_log(path: Path, messages: int, keys: int = 100_000, seed: int = 7) -> None:
    """A log of `messages` (offset, key) rows over `keys` keys, seeded, in Parquet row groups."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    names = np.array([f"key-{n}" for n in range(keys)], dtype=object)
    schema = pa.schema([("offset", pa.int64()), ("key", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, messages, 1_000_000):
            count = min(1_000_000, messages - start)
            picks = names[rng.integers(0, keys, count)]
            offsets = pa.array(np.arange(start, start + count, dtype=np.int64))
            writer.write_table(pa.table({"offset": offsets, "key": pa.array(picks, pa.string())}, schema=schema))


def child_main(mode: str, options: dict[str, Any]) -> None:
    """Run one measurement in this (child) process and print its figures as one JSON line."""
    if mode == "spark":
        figures = spark_child(
            options["trace"],
            options["master"],
            options.get("driver_memory"),
            options.get("shards", 1),
        )
    elif mode == "floor":
        figures = floor_child(options["trace"], options["master"], options.get("driver_memory"))
    elif mode == "python":
        figures = python_child(options["trace"], options["budget"])
    elif mode == "pandas":
        figures = pandas_child(options["trace"], options["runs"])
    elif mode == "duckdb":
        figures = duckdb_child(options["trace"], options["runs"], options["threads"], options["memory_gb"])
    elif mode == "dispatcher":
        figures = dispatcher_child(options["trace"], options["messages"], options["master"])
    elif mode == "logreplay":
        figures = logreplay_child(options["log"], options["master"], options["lag"])
    else:
        raise SystemExit(f"unknown child mode {mode}")
    print(json.dumps(figures), flush=True)


# --- the parent: measure, project, print ----------------------------------------------------------------


def duration(seconds: float) -> str:
    """Seconds as '42 s', '12 min' or '3.5 h'."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:,.1f} h"


def gib(value: float) -> str:
    """Bytes as GiB with one decimal."""
    return f"{value / GIB:.1f}"


@dataclass
class Row:
    """One line of the throughput table."""

    what: str
    cores: str
    rate: float | None
    seconds: float | None
    driver: int = 0
    jvm: int = 0
    workers: int = 0
    note: str = ""


def spark_rows(
    trace: Path, events: int, args: argparse.Namespace, stages: list[tuple[str, str, list[Any]]]
) -> list[Row]:
    """The Spark validator (every kind, up to --every-kind-up-to) and its floor on local[2] and local[1]."""
    rows = []
    for cores in (2, 1):  # the target's figure first
        master = f"local[{cores}]"
        options = {"trace": str(trace), "master": master, "driver_memory": args.driver_memory}
        if events <= args.every_kind_up_to:
            rows.extend(every_kind_rows(cores, options, args, label(events), stages))
        floor = run_child("floor", options, args.limit, args.spark_timeout)
        what = f"{FLOOR} (key events into Python, unchecked), {master}"
        if floor.error is not None:
            rows.append(Row(what, str(cores), None, None, note=floor.error))
            continue
        figures = floor.figures
        note = f"{figures['shipped']:,} key events; cores busy {figures['cpu_s'] / figures['seconds']:.2f}"
        rows.append(
            Row(
                what,
                str(cores),
                events / figures["seconds"],
                figures["seconds"],
                max(floor.peaks.driver, figures["driver_hwm"]),
                floor.peaks.jvm,
                floor.peaks.workers,
                note,
            )
        )
    return sorted(rows, key=lambda row: (row.what.startswith(FLOOR), row.cores))


@dataclass
class Memo:
    """What a smaller size measured, to project a larger one from."""

    python: dict[str, Any] | None = None
    python_events: int = 0
    pandas_hwm: int = 0
    pandas_events: int = 0


def every_kind_rows(
    cores: int, options: dict[str, Any], args: argparse.Namespace, size: str, stages: list[tuple[str, str, list[Any]]]
) -> list[Row]:
    """The validator on every kind, judged by the Python checker in shards of keys (one per core) and, with several
    cores, in one task as well (the baseline of the same sitting); the median of --spark-runs fresh processes."""
    rows = []
    for shards in sorted({cores, 1}, reverse=True):
        how = "in one task" if shards == 1 else f"in {shards} shards"
        what = f"{EVERY_KIND} {how}, {options['master']}"
        results = [
            run_child("spark", {**options, "shards": shards}, args.limit, args.spark_timeout)
            for _ in range(args.spark_runs)
        ]
        good = [r for r in results if r.error is None]
        if not good:
            failed = results[-1]
            note = f"timed out after {failed.seconds:.0f}s" if failed.timed_out else failed.error or ""
            rows.append(Row(what, str(cores), None, None, note=note))
            continue
        result = sorted(good, key=lambda r: r.figures["seconds"])[len(good) // 2]
        figures = result.figures
        stages.append((size, f"{options['master']} {how}", figures["stages"]))
        judging = next((s for d, s in figures["stages"] if d.startswith("judging")), 0.0)
        note = f"{figures['verdict']}, {figures['anomalies']} anomalies; judged {figures['judged']}: {judging:.0f}s"
        rows.append(
            Row(
                what,
                str(cores),
                figures["events"] / figures["seconds"],
                figures["seconds"],
                max(result.peaks.driver, figures["driver_hwm"]),
                max(result.peaks.jvm, figures["jvm_hwm"]),
                result.peaks.workers,
                note,
            )
        )
    return rows


def python_row(trace: Path, events: int, args: argparse.Namespace, memo: Memo) -> Row:
    """The Python checker, within --python-budget seconds; projected to the whole trace when cut short."""
    what = "Python checker (check_trace loop)"
    if args.skip_python:
        return Row(what, "1", None, None, note="skipped (--skip-python)")
    if memo.python is not None and not memo.python["complete"]:
        rate = memo.python["steady_rate"]
        hours = events / rate / 3600  # memory is not projected: the checker keeps the live state only
        return Row(what, "1", None, None, note=f"not run: projected {hours:,.1f} h at {rate:,.0f} ev/s")
    result = run_child("python", {"trace": str(trace), "budget": args.python_budget}, args.limit)
    if result.error is not None:
        return Row(what, "1", None, None, note=result.error)
    figures = result.figures
    memo.python, memo.python_events = figures, events
    peak = max(result.peaks.driver, figures["driver_hwm"])
    if figures["complete"]:
        note = f"{figures['verdict']}, {figures['anomalies']} anomalies"
        return Row(what, "1", figures["rate"], figures["seconds"], driver=peak, note=note)
    rate = figures["steady_rate"]
    note = (
        f"cut at {figures['events']:,} events after {figures['seconds']:.0f}s; steady {rate:,.0f} ev/s; "
        f"whole trace projected {duration(figures['seconds'] + (events - figures['events']) / rate)}"
    )
    return Row(what, "1", rate, None, driver=peak, note=note)


def baseline_rows(trace: Path, events: int, args: argparse.Namespace, memo: Memo) -> list[Row]:
    """pandas (when its projected memory fits) and DuckDB on 1 and 2 threads, the same per-key check."""
    rows = []
    runs = args.runs if events <= 20_000_000 else 1
    what = "pandas baseline (per-key check)"
    projected = memo.pandas_hwm * events / max(1, memo.pandas_events)
    if memo.pandas_hwm and projected > min(args.limit, available_gib() * GIB * 0.8):
        rows.append(Row(what, "1", None, None, note=f"not run: projected {gib(projected)} GB"))
    else:
        result = run_child("pandas", {"trace": str(trace), "runs": runs}, args.limit)
        if result.error is not None:
            rows.append(Row(what, "1", None, None, note=result.error))
        else:
            figures = result.figures
            memo.pandas_hwm, memo.pandas_events = max(result.peaks.driver, figures["driver_hwm"]), events
            note = f"median of {runs}; {figures['reorders']} reorders, {figures['overlaps']} overlaps"
            rows.append(Row(what, "1", events / figures["seconds"], figures["seconds"], memo.pandas_hwm, note=note))
    for threads in (1, 2):
        what = f"DuckDB baseline (per-key check), {threads} thread{'s' if threads > 1 else ''}"
        options = {"trace": str(trace), "runs": runs, "threads": threads, "memory_gb": args.duckdb_memory_gb}
        result = run_child("duckdb", options, args.limit)
        if result.error is not None:
            rows.append(Row(what, str(threads), None, None, note=result.error))
            continue
        figures = result.figures
        note = f"median of {runs}; {figures['reorders']} reorders, {figures['overlaps']} overlaps"
        peak = max(result.peaks.driver, figures["driver_hwm"])
        rows.append(Row(what, str(threads), events / figures["seconds"], figures["seconds"], peak, note=note))
    return rows


def dispatcher_figures(trace: Path, messages: int, args: argparse.Namespace) -> None:
    """THE SPARK DISPATCHER'S MESSAGES PER SECOND: prints "not measured yet" while ks_spark.dispatcher does not import.

    Replays the synthetic trace's first `messages` publishes and their acks (16 consumers, ring selector)
    through `ks_spark.dispatcher.engine.replay` with a `SparkEraRunner` on local[1] and local[2].
    """
    table = Table(title=f"Spark dispatcher: {messages:,} messages of the synthetic workload", title_justify="left")
    for header in ("master", "messages/s", "seconds", "driver peak GB", "JVM peak GB", "workers peak GB", "note"):
        table.add_column(header, justify="left" if header in ("master", "note") else "right")
    try:
        for module in ("ks_spark.dispatcher.runner", "ks_spark.dispatcher.engine"):
            importlib.import_module(module)
    except ImportError as error:
        console.print(f"Spark dispatcher: not measured yet (ks_spark.dispatcher.runner does not import: {error})")
        return
    for cores in (1, 2):
        master = f"local[{cores}]"
        result = run_child("dispatcher", {"trace": str(trace), "messages": messages, "master": master}, args.limit)
        if result.error is not None:
            table.add_row(master, "-", "-", "-", "-", "-", f"not measured: {result.error}")
            continue
        figures, peaks = result.figures, result.peaks
        note = f"{figures['ops']:,} ops, {figures['delivered']:,} deliveries, {figures['refused']} refused"
        table.add_row(
            master,
            f"{messages / figures['seconds']:,.0f}",
            f"{figures['seconds']:.1f}",
            gib(max(peaks.driver, figures["driver_hwm"])),
            gib(peaks.jvm),
            gib(peaks.workers),
            note,
        )
    console.print(table)
    logreplay_figures(args)


def logreplay_figures(args: argparse.Namespace) -> None:
    """`spark-dispatch` (the log replay, the dispatcher's at-scale path) on local[1] and local[2]."""
    messages = args.log_messages
    if messages <= 0:
        return
    log = Path(args.data) / f"log-{messages}.parquet"
    if not log.exists():
        write_log(log, messages)
    title = f"Spark dispatcher, log replay (spark-dispatch): {messages:,} messages, 100,000 keys, 16 consumers"
    table = Table(title=title, title_justify="left")
    for header in ("master", "messages/s", "seconds", "trace events", "driver peak GB", "JVM peak GB", "workers GB"):
        table.add_column(header, justify="left" if header == "master" else "right")
    for cores in (1, 2):
        master = f"local[{cores}]"
        result = run_child("logreplay", {"log": str(log), "master": master, "lag": 8}, args.limit, args.spark_timeout)
        if result.error is not None:
            table.add_row(master, "-", "-", "-", "-", "-", f"failed: {result.error}")
            continue
        figures, peaks = result.figures, result.peaks
        table.add_row(
            master,
            f"{messages / figures['seconds']:,.0f}",
            f"{figures['seconds']:.1f}",
            f"{figures['events']:,}",
            gib(max(peaks.driver, figures["driver_hwm"])),
            gib(peaks.jvm),
            gib(peaks.workers),
        )
    console.print(table)


def print_rows(title: str, rows: list[Row], baseline: float | None) -> None:
    """The throughput table of one size, with each rate as a ratio to the pandas baseline of this run."""
    table = Table(title=title, title_justify="left")
    headers = ("what", "cores", "events/s", "seconds", "vs pandas", "driver GB", "JVM GB", "workers GB", "note")
    for header in headers:
        table.add_column(header, justify="left" if header in ("what", "note") else "right")
    for row in rows:
        ratio = f"{row.rate / baseline:.3f}" if row.rate and baseline else "-"
        table.add_row(
            row.what,
            row.cores,
            f"{row.rate:,.0f}" if row.rate else "-",
            f"{row.seconds:.1f}" if row.seconds else "-",
            ratio,
            gib(row.driver) if row.driver else "-",
            gib(row.jvm) if row.jvm else "-",
            gib(row.workers) if row.workers else "-",
            row.note,
        )
    console.print(table)


def print_stages(stages: list[tuple[str, str, list[Any]]]) -> None:
    """Seconds per validator stage (as the validator announces them), per size and master."""
    if not stages:
        return
    names: list[str] = []
    for _, _, measured in stages:
        for name, _ in measured:
            if name not in names:
                names.append(name)
    table = Table(title="Spark validator: seconds per stage", title_justify="left")
    table.add_column("stage")
    for size, master, _ in stages:
        table.add_column(f"{size} {master}", justify="right")
    for name in names:
        cells = []
        for _, _, measured in stages:
            cells.append(next((f"{s:.1f}" for n, s in measured if n == name), "-"))
        table.add_row(name, *cells)
    console.print(table)


def print_targets(results: dict[int, list[Row]]) -> None:
    """The issue's targets: every kind judged at >= 1M events/s on local[2], flat memory, near-linear scaling, against
    the floor."""
    lines = []
    for events, rows in results.items():
        floor = next((r for r in rows if r.what.startswith(FLOOR) and r.cores == "2" and r.rate), None)
        for prefix, name in ((EVERY_KIND, "every kind"),):
            # (every kind on one core is in one task; on two, the default: in shards, the one-task run beside it)
            spark = {
                r.cores: r for r in rows if r.what.startswith(prefix) and r.rate and "one task, local[2" not in r.what
            }
            alone = next((r for r in rows if r.what.startswith(f"{prefix} in one task, local[2") and r.rate), None)
            if alone is not None and "2" in spark:
                lines.append(
                    f"{label(events)}: {name}, local[2] in shards of keys / in one task: "
                    f"x{(spark['2'].rate or 0.0) / (alone.rate or 1.0):.2f}"
                )
            if "2" in spark:
                two = spark["2"].rate or 0.0
                state = "met" if two >= TARGET_RATE else "NOT met"
                share = f", {two / floor.rate:.0%} of the floor" if floor is not None and floor.rate else ""
                lines.append(
                    f"{label(events)}: Spark validator, {name}, local[2] {two:,.0f} ev/s "
                    f"(target {TARGET_RATE:,}: {state}{share})"
                )
            if "1" in spark and "2" in spark:
                scaling = (spark["2"].rate or 0.0) / (spark["1"].rate or 1.0)
                lines.append(f"{label(events)}: {name}, scaling local[1] -> local[2]: x{scaling:.2f} (linear: x2.00)")
        if floor is not None:
            state = "under" if (floor.rate or 0.0) < TARGET_RATE else "over"
            rate = floor.rate or 0.0
            lines.append(f"{label(events)}: Spark floor local[2] (no checking) {rate:,.0f} ev/s, {state} the target")
    sizes = sorted(results)
    if len(sizes) >= 2:
        first, last = sizes[0], sizes[-1]
        for (prefix, name), cores in itertools.product(((EVERY_KIND, "every kind"),), "12"):
            a = next((r for r in results[first] if r.what.startswith(prefix) and r.cores == cores and r.rate), None)
            b = next((r for r in results[last] if r.what.startswith(prefix) and r.cores == cores and r.rate), None)
            # (on two cores, the first row of every kind is the default: in shards of keys)
            if a and b:
                total_a, total_b = a.driver + a.jvm + a.workers, b.driver + b.jvm + b.workers
                lines.append(
                    f"memory, {name}, local[{cores}]: {gib(total_a)} GB at {label(first)} -> {gib(total_b)} GB at "
                    f"{label(last)} (x{total_b / max(1, total_a):.2f} for x{last / first:g} events)"
                )
    for line in lines:
        console.print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10M,100M", help="trace sizes in events (default 10M,100M)")
    parser.add_argument("--quick", action="store_true", help="one 200k-event trace and short budgets (about a minute)")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "keyshared-bench-spark",
        help="folder of the cached traces (default: a folder under /tmp)",
    )
    parser.add_argument("--seed", type=int, default=7, help="trace generator seed (default 7)")
    parser.add_argument("--skip-python", action="store_true", help="do not run the Python checker")
    parser.add_argument("--python-budget", type=float, default=300, help="seconds for the Python checker (default 300)")
    parser.add_argument(
        "--runs", type=int, default=3, help="runs of each baseline up to 20M events; median (default 3)"
    )
    parser.add_argument(
        "--spark-runs", type=int, default=1, help="fresh processes per Spark figure; median (default 1)"
    )
    parser.add_argument(
        "--every-kind-up-to",
        type=parse_size,
        default=10_000_000,
        help="also time the validator on every kind (its one-task pass included) up to this size (default 10M)",
    )
    parser.add_argument("--spark-timeout", type=float, help="seconds before a Spark run is stopped (default: none)")
    parser.add_argument("--driver-memory", help="spark.driver.memory of the validator runs (default: Spark's, 1g)")
    parser.add_argument("--duckdb-memory-gb", type=int, default=8, help="DuckDB memory_limit (default 8)")
    parser.add_argument(
        "--dispatcher-messages", type=int, default=200_000, help="messages replayed through the Spark dispatcher"
    )
    parser.add_argument(
        "--log-messages", type=int, default=1_000_000, help="messages of the log replayed by spark-dispatch"
    )
    parser.add_argument(
        "--parts",
        default="validator,python,baselines,dispatcher",
        help="what to measure (comma list of validator, python, baselines, dispatcher; default all)",
    )
    parser.add_argument("--limit-gb", type=float, default=18, help="kill a measurement past this RSS (default 18)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument(readme.FLAG, action="store_true", help=readme.HELP)
    parser.add_argument("--child-options", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args.child, json.loads(args.child_options))
        return
    readme.record(args.write_readme, "bench_spark", quick=args.quick)
    args.limit = int(args.limit_gb * GIB)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    if args.quick:
        sizes, args.runs, args.python_budget = [200_000], 1, 20
        args.dispatcher_messages = min(args.dispatcher_messages, 5_000)
        args.log_messages = min(args.log_messages, 20_000)
    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    unknown = parts - {"validator", "python", "baselines", "dispatcher"}
    if unknown:
        parser.error(f"--parts: unknown {', '.join(sorted(unknown))} (validator, python, baselines, dispatcher)")
    console.print(f"machine: {machine()}")
    console.print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; traces cached in {args.data}")
    console.print(f"baselines check {BASELINE_CHECK}")
    traces = Table(title="synthetic traces (benchmarks/synthetic_trace.py)", title_justify="left")
    for header in ("size", "events", "messages", "file MB", "generated"):
        traces.add_column(header, justify="right")
    paths: dict[int, Path] = {}
    for events in sizes:
        path, took = ensure_trace(args.data, events, args.seed)
        paths[events] = path
        from benchmarks import synthetic_trace

        messages = synthetic_trace.plan(events, args.seed).messages
        made = f"{took:.1f}s ({events / took:,.0f} ev/s)" if took is not None else "cached"
        traces.add_row(label(events), f"{events:,}", f"{messages:,}", f"{path.stat().st_size / 2**20:,.0f}", made)
    console.print(traces)
    memo = Memo()
    results: dict[int, list[Row]] = {}
    stages: list[tuple[str, str, list[Any]]] = []
    for events in sizes:
        trace = paths[events]
        rows = spark_rows(trace, events, args, stages) if "validator" in parts else []
        if "python" in parts:
            rows.append(python_row(trace, events, args, memo))
        if "baselines" in parts:
            rows.extend(baseline_rows(trace, events, args, memo))
        results[events] = rows
        pandas = next((r.rate for r in rows if r.what.startswith("pandas") and r.rate), None)
        if rows:
            print_rows(f"{label(events)} events ({events:,})", rows, pandas)
        if events == sizes[0] and "dispatcher" in parts:
            dispatcher_figures(paths[sizes[0]], args.dispatcher_messages, args)
    print_stages(stages)
    print_targets(results)


if __name__ == "__main__":
    readme.run(main)
