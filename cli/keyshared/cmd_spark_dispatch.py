"""`keyshared spark-dispatch`: replay a log through the Spark-backed dispatcher into a trace."""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ks_spark.session import check_driver_memory, check_master

from keyshared.ui import argument_type, console, error_console, table


def register(commands: Any) -> None:
    """Add `spark-dispatch`."""
    command = commands.add_parser(
        "spark-dispatch",
        help="replay a log (offset, key) through the Spark dispatcher: every consumer's ordered deliveries as a trace",
        description="Replay a write-ahead log through Key-Shared dispatch on Spark: each key's messages go through "
        "one task in offset order, the keys in parallel, with the reference's routing, draining and acks; the cursor "
        "is a running maximum over offsets. Consumers join and leave at log positions (--consumers, --membership) "
        "and ack each delivery --ack-lag publishes after receiving it; --crash-at restarts the dispatcher from its "
        "persisted cursor (what was not resolved is delivered again). The trace (a Parquet folder in the spec's "
        "format) can be judged with validate-replay or check-trace. Capacity and the window never bind in a replay "
        "(the dispatcher declares flow_control: false). Exit codes: 0 done, 64 usage, 65 bad input, 66 missing "
        "input, 69 no Java or Spark cannot start, 70 a Spark job failed (out of memory, a lost executor).",
    )
    command.add_argument("log", metavar="LOG", help="the log: Parquet (file or folder) or JSON lines, offset and key")
    command.add_argument("--out", required=True, metavar="FOLDER", help="where to write the trace (a Parquet folder)")
    command.add_argument("--profile", choices=("strict", "owner"), default="owner", help="ordering profile")
    command.add_argument(
        "--selector",
        choices=("ring", "pulsar-consistent", "pulsar-auto-split", "danube"),
        default="ring",
        help="the selector (the same routing as the reference's)",
    )
    command.add_argument("--points", type=int, default=100, metavar="N", help="points per consumer on ring selectors")
    command.add_argument("--consumers", default="", metavar="A,B,C", help="consumers joining before the first message")
    command.add_argument(
        "--membership",
        type=Path,
        metavar="FILE",
        help='joins and leaves as JSON lines: {"at": OFFSET, "op": "add_consumer"|"remove_consumer", "consumer": '
        '"c1", "filters": ["a*"]}',
    )
    command.add_argument("--ack-lag", type=int, default=1, metavar="N", help="publishes between a delivery and its ack")
    command.add_argument(
        "--crash-at", type=int, action="append", default=[], metavar="OFFSET", help="restart before this offset"
    )
    command.add_argument(
        "--master",
        metavar="URL",
        type=argument_type(check_master),
        help="Spark master (default: local[*], or spark-submit's)",
    )
    command.add_argument("--partitions", type=int, metavar="N", help="tasks per pass (default: twice the cores)")
    command.add_argument(
        "--driver-memory",
        metavar="SIZE",
        type=argument_type(check_driver_memory),
        help="Spark driver memory, e.g. 4g (embedded runs)",
    )
    command.set_defaults(handler=run_spark_dispatch)


def run_spark_dispatch(args: argparse.Namespace) -> int:
    """Plan, replay, write the trace, print the summary."""
    from ks_spark.dispatcher.walreplay import LogReplay, control_ops_from, read_controls, replay_log
    from ks_spark.session import SessionOptions, get_session, spark_job
    from ks_spec.errors import UserError

    from keyshared.ui import progress

    if args.ack_lag < 1:
        raise UserError("--ack-lag: must be at least 1 (a consumer acks after it received the message)", 64)
    if args.points < 1:
        raise UserError("--points: must be at least 1", 64)
    if args.partitions is not None and args.partitions < 1:
        raise UserError("--partitions: must be at least 1", 64)
    if "://" not in str(args.out) and Path(args.out).exists() and not Path(args.out).is_dir():
        raise UserError(f"--out {args.out}: exists and is not a folder", 64)
    if "://" not in args.log and not Path(args.log).exists():
        raise UserError(f"{args.log}: no such log file or folder", exit_code=66)
    names = [name.strip() for name in args.consumers.split(",") if name.strip()]
    controls = control_ops_from(names)
    if args.membership is not None:
        controls += read_controls(args.membership)
    if not controls:
        raise UserError("no consumers: give --consumers a,b or a --membership file", 64)
    replay = LogReplay(
        args.log,
        profile=args.profile,
        selector=args.selector,
        points=args.points,
        lag=args.ack_lag,
        controls=controls,
        crashes=sorted(args.crash_at),
    )
    with error_console.status("starting Spark"):
        shuffle = args.partitions or 16
        session = get_session(
            SessionOptions(master=args.master, driver_memory=args.driver_memory, shuffle_partitions=shuffle)
        )
    started = time.perf_counter()
    with progress() as bar, spark_job(args.log), staged_output(str(args.out)) as staging:
        task = bar.add_task("replaying", total=None)
        summary = replay_log(
            session,
            replay,
            staging,
            stage=lambda text: bar.update(task, description=text),
            partitions=args.partitions,
        )
    elapsed = time.perf_counter() - started
    rows = [
        ("messages", f"{summary.messages:,}"),
        ("deliveries", f"{summary.deliveries:,}"),
        ("redeliveries (attempt > 1)", f"{summary.redeliveries:,}"),
        ("delivered again after a crash", f"{summary.duplicates:,}"),
        ("acks", f"{summary.acks:,}"),
        ("filtered", f"{summary.filtered:,}"),
        ("final persisted cursor", f"{summary.cursor:,}"),
        ("eras (crashes + 1)", str(summary.eras)),
        ("trace events", f"{summary.events:,}"),
        ("seconds", f"{elapsed:.1f}"),
        ("messages per second", f"{summary.messages / elapsed:,.0f}" if elapsed else "-"),
    ]
    console.print(table(f"spark-dispatch {args.log}", ("", "value"), rows))
    console.print(table("deliveries per consumer", ("consumer", "deliveries"), sorted(summary.per_consumer.items())))
    console.print(f"trace written to {args.out}: judge it with `keyshared validate-replay {args.out}`", soft_wrap=True)
    return 0


@contextmanager
def staged_output(out: str) -> Iterator[str]:
    """A sibling folder to write the trace into, moved to `out` only once the replay succeeded.

    A failed or interrupted replay leaves `out` as it was (a previous trace survives) and no partial
    folder behind. URLs (a cluster's storage) are written in place: renames there are not atomic.
    """
    if "://" in out:
        yield out
        return
    target = Path(out)
    staging = target.parent / f".{target.name}.partial-{os.getpid()}"
    try:
        yield str(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
