"""Starting Spark for keyshared: embedded `local[*]` by default, any master by URL, or under spark-submit.

Only this package imports pyspark. Settings that must be fixed before the JVM starts (bind
addresses, GC flags, memory) are applied here, once, so every command and test gets the same
well-behaved session on a laptop and on a cluster.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ks_spec import paths
from ks_spec.errors import JobFailed, Unavailable, UserError
from ks_spec.java import require_java

if TYPE_CHECKING:
    from pyspark import StorageLevel
    from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"
LOG4J_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
"""Spark's JVM logs errors only: the commands print their own progress."""


@dataclass(frozen=True)
class SessionOptions:
    """How to start (or join) a Spark session.

    `master=None` means: keep the master spark-submit chose, else run embedded on every core.
    `quick=True` trades peak JIT speed for a faster start (tests, `keyshared verify`).
    """

    master: str | None = None
    app_name: str = "keyshared"
    shuffle_partitions: int | None = None
    driver_memory: str | None = None
    quick: bool = False
    ui: bool = False
    extra: dict[str, str] = field(default_factory=dict)


MASTER_URL = re.compile(
    r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?|local-cluster\[[0-9, ]+\]|(spark|k8s|mesos)://\S+|yarn"
)
"""The master URLs Spark accepts (local[N], local[*], local[N,F], spark://, k8s://, yarn, ...)."""

MEMORY_SIZE = re.compile(r"([1-9][0-9]*)\s*([kmgt]?)b?", re.IGNORECASE)
MIN_DRIVER_MB = 512
"""Spark refuses a driver heap under 450 MB (1.5 times its 300 MB reserve); 512m is the smallest round size."""


def check_master(text: str) -> str:
    """A Spark master URL as given, or a one-line usage error naming it (before any JVM starts)."""
    if not MASTER_URL.fullmatch(text.strip()):
        raise UserError(
            f"--master {text}: not a Spark master URL (local[*], local[2], spark://host:7077, k8s://..., yarn)",
            exit_code=64,
        )
    return text.strip()


def check_driver_memory(text: str) -> str:
    """A JVM memory size of at least 512m (2g, 4096m), normalised, or a one-line usage error naming it."""
    match = MEMORY_SIZE.fullmatch(text.strip())
    if match is None:
        raise UserError(f"--driver-memory {text}: not a memory size (e.g. 2g, 4096m)", exit_code=64)
    scale = {"": 1, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2}[match.group(2).lower()]  # no unit: MiB
    if int(match.group(1)) * scale < MIN_DRIVER_MB:
        raise UserError(f"--driver-memory {text}: Spark needs at least {MIN_DRIVER_MB}m", exit_code=64)
    return f"{match.group(1)}{match.group(2).lower()}"


def under_spark_submit() -> bool:
    """True when this Python process was launched by spark-submit (which owns the master and the JVM)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def require_pyspark() -> None:
    """Raise Unavailable with one line when pyspark is not installed."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise Unavailable(
            "pyspark is not installed: run `make test` or `pip install -e '.[spark]'` to get the pinned version"
        ) from None


def _scratch_folder(prefix: str) -> str:
    """A temporary folder removed when this process exits, so runs leave nothing behind in /tmp."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def get_session(options: SessionOptions | None = None) -> SparkSession:
    """A SparkSession configured for keyshared; reuses an active one (spark-submit, tests) if any."""
    require_pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    options = options or SessionOptions()
    if not under_spark_submit():
        require_java()
    builder = SparkSession.builder.appName(options.app_name)
    master = check_master(options.master) if options.master is not None else None
    if master is None and not under_spark_submit():
        master = "local[*]"
    if master is not None:
        builder = builder.master(master)
    local = master is not None and master.startswith("local")
    # Python workers must run this interpreter (the one with keyshared installed), not whatever is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if local:
        # The hostname may resolve to a loopback address; bind explicitly so Spark neither warns nor
        # picks an interface other processes can reach.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        builder = builder.config("spark.driver.host", LOOPBACK).config("spark.driver.bindAddress", LOOPBACK)
        warehouse = _scratch_folder("ks-spark-warehouse-")
        builder = builder.config("spark.sql.warehouse.dir", warehouse)
    settings = {
        "spark.ui.enabled": "true" if options.ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
        # Int.MaxValue turns off the byte limit of the batches sent to Python, which Spark otherwise checks after
        # every row by measuring every column (quadratic in a batch for the trace's list columns: the one-task pass
        # ran 12x slower than its checker). Batches stay bounded by maxRecordsPerBatch.
        "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
        "spark.python.worker.reuse": "true",
    }
    if options.shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(options.shuffle_partitions)
    if options.driver_memory is not None:
        settings["spark.driver.memory"] = check_driver_memory(options.driver_memory)
    flags = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}" if os.path.exists(LOG4J_CONFIG) else ""
    if options.quick:
        flags += " -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    settings["spark.driver.extraJavaOptions"] = flags
    settings["spark.executor.extraJavaOptions"] = flags
    settings.update(options.extra)
    for name, value in settings.items():
        builder = builder.config(name, value)
    try:
        if not under_spark_submit():
            launch_jvm({**settings, "spark.app.name": options.app_name, **({"spark.master": master} if master else {})})
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
    except spark_errors() as error:
        where = f"master {master}" if master is not None else "spark-submit's master"
        text = str(error)
        reason = first_cause(text)
        if any(marker in text for marker in SHUT_DOWN_MARKERS):
            reason = "Spark stopped while starting (is the master reachable? Spark's log above says why)"
        raise Unavailable(f"cannot start Spark ({where}): {reason}") from error
    if not local:
        ship_packages(session)
    return session


JVM_NOISE = re.compile(
    r"^(\s+at |\s*\.\.\. [0-9]+ (more|common frames omitted)|Caused by: |WARNING: Using incubator modules)"
)
"""Lines of the JVM's stderr a user never sees: stack frames and causes (the failure is said once, in one line, by
the command), and the warning every start prints for the incubator module Spark's launcher always adds."""


def launch_jvm(settings: dict[str, str]) -> None:
    """Start Spark's JVM (once per process) with its stderr read by a thread that drops JVM_NOISE and forwards the rest.

    Log4j already prints no stack (log4j2.properties), but a JVM library may still print one itself, and the start
    prints a warning on every run: this is the one place the JVM's stderr reaches the user. The thread reads from the
    first byte, so a JVM that fails to start still says why.
    """
    import threading

    from pyspark import SparkConf, java_gateway
    from pyspark.core.context import SparkContext

    with SparkContext._lock:
        if getattr(SparkContext, "_gateway", None) is not None:
            return
        conf = SparkConf(loadDefaults=False)
        for name, value in settings.items():
            conf.set(name, value)
        read_end, write_end = os.pipe()
        reader = os.fdopen(read_end, "rb")
        threading.Thread(target=_forward_jvm_stderr, args=(reader,), name="jvm-stderr", daemon=True).start()
        launch: Any = java_gateway.launch_gateway  # untyped in pyspark
        try:
            gateway = launch(conf, popen_kwargs={"stderr": write_end})
        finally:
            os.close(write_end)  # the JVM holds its own copy; the thread sees the end when the JVM exits
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm


def _forward_jvm_stderr(stream: Any) -> None:
    """Copy the JVM's stderr to ours line by line, without JVM_NOISE, until the JVM exits (never blocking it)."""
    with stream:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            if JVM_NOISE.match(line):
                continue
            try:
                sys.stderr.write(line)
                sys.stderr.flush()
            except (OSError, ValueError):  # our stderr is closed (the interpreter is exiting): keep draining
                pass


SHIPPED_PACKAGES = ("ks_spark", "ks_spec", "ks_reference", "ks_conformance")
"""The packages whose code runs inside Spark tasks (mapInArrow bodies and what they import: the one-task pass runs
the conformance checker)."""

SHIPPED_SPEC_FILES = ("requirements.json", "schemas")
"""The spec's data files task-side code reads (ks_spec.paths finds them in the archive)."""


def ship_packages(session: SparkSession) -> None:
    """Zip keyshared's task-side packages and add them to the session, so executors elsewhere can import them."""
    session.sparkContext.addPyFile(task_archive(_scratch_folder("ks-spark-py-")))


def task_archive(folder: str) -> str:
    """Write `keyshared_tasks.zip` in `folder`: the task-side packages and the spec data they read; its path."""
    import importlib
    import zipfile

    archive = os.path.join(folder, "keyshared_tasks.zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name in SHIPPED_PACKAGES:
            package_dir = os.path.dirname(importlib.import_module(name).__file__ or "")
            for root, _, files in os.walk(package_dir):
                for file in files:
                    if file.endswith(".py"):
                        full = os.path.join(root, file)
                        bundle.write(full, os.path.join(name, os.path.relpath(full, package_dir)))
        for entry in SHIPPED_SPEC_FILES:
            source = paths.SPEC_DIR / entry
            for full_path in sorted(source.rglob("*")) if source.is_dir() else [source]:
                if full_path.is_file():
                    relative = full_path.relative_to(paths.SPEC_DIR).as_posix()
                    bundle.write(full_path, f"{paths.SHIPPED_SPEC_FOLDER}/{relative}")
    return archive


def cache_level() -> StorageLevel:
    """How the passes keep the frames several jobs read: on local disk only, streamed back.

    MEMORY_AND_DISK reads a spilled block back into one heap buffer of the block's size, and at 100M events
    on local[2] that ran the JVM out of heap beside the other task's sort; on disk the memory stays flat,
    and at 10M events it was no slower (62.6 s against 66.4 s on local[2]).
    """
    from pyspark import StorageLevel

    level: StorageLevel = StorageLevel.DISK_ONLY
    return level


def default_parallelism(session: SparkSession) -> int:
    """How many tasks can run at once (cores of a local master, executors' cores on a cluster)."""
    return max(1, int(session.sparkContext.defaultParallelism))


MORE_MEMORY = (
    "give Spark more memory (--driver-memory 4g on an embedded run, spark.executor.memory on a cluster) "
    "or more partitions"
)
OUT_OF_MEMORY_HINT = f"the JVM ran out of heap: {MORE_MEMORY}"
SHUT_DOWN_HINT = (
    "Spark shut down in the middle of the job (in an embedded run, usually because the JVM ran out of heap; "
    f"Spark's log above names the cause): {MORE_MEMORY}"
)
SHUT_DOWN_MARKERS = (
    'dagScheduler()" is null',
    "stopped SparkContext",
    "SparkContext was shut down",
    "SparkContext has been shutdown",
)
"""What a job's error says when a task's fatal error (an OutOfMemoryError) stopped the SparkContext under it:
the error the driver gets then no longer names the cause."""


def describe_failure(text: str) -> str:
    """One line for a failed Spark job's error text: the JVM's out-of-memory error with a hint, else its first cause."""
    if "OutOfMemoryError" in text:
        return OUT_OF_MEMORY_HINT
    if any(marker in text for marker in SHUT_DOWN_MARKERS):
        return SHUT_DOWN_HINT
    return first_cause(text)


def first_cause(text: str) -> str:
    """The first Java or Spark cause in an error's text, shortened to one line."""
    lines = [line.strip().removeprefix(": ") for line in text.splitlines() if line.strip()]  # py4j prefixes ": "
    causes = [line for line in lines if line.startswith(("java.", "org.apache.spark.", "Caused by:"))]
    first = (causes or lines or ["no message"])[0]
    return first if len(first) <= 240 else first[:237] + "..."


def spark_errors() -> tuple[type[BaseException], ...]:
    """What a failing JVM raises in Python: py4j's errors, PySpark's, and a gateway connection that broke."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (Py4JError, PySparkException, ConnectionError)


@contextmanager
def spark_job(what: str) -> Iterator[None]:
    """Run Spark work for `what` (a trace, a log); a failed job becomes one line (JobFailed), not a Java stack."""
    try:
        yield
    except spark_errors() as error:
        raise JobFailed(f"{what}: the Spark job failed: {describe_failure(str(error))}") from error
