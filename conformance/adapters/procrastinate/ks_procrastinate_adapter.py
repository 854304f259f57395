"""A conformance adapter (spec/adapter-protocol.md, v1 and v2) for procrastinate on a real PostgreSQL.

Run it as `python conformance/adapters/procrastinate/adapter.py [--dsn DSN]` (a script that imports this module, so
that procrastinate's App is not defined in `__main__`); without `--dsn` it reads
$KS_PROCRASTINATE_DSN, then asks `postgres.sh status`. The mapping is in this folder's README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import procrastinate
from ks_conformance.stdio import serve_stdio
from procrastinate import exceptions as procrastinate_exceptions
from procrastinate import jobs as jobs_module

HERE = Path(__file__).resolve().parent
TASK_NAME = "keyshared.process"
T = TypeVar("T")

ZOMBIE_OPS = ("zombie_ack", "zombie_nack")
"""A worker whose delivery ended reports its result late (spec KS-ACK-3): a stopped or stalled worker's task that
was still running."""
TERMINAL_STATUSES = ("succeeded", "failed", "aborted", "cancelled")
OUTCOMES: dict[str, str | None] = {"failed": "dead_lettered", "aborted": None}
"""procrastinate's terminal statuses outside the spec's vocabulary and the resolution each stands for: a failed job
stays in the table, where an operator can see it and retry it (a dead-letter queue in all but name); an aborted job
is never run again and cannot be retried, so it stands for no resolution (a loss)."""

CONFIG_VALUES: dict[str, list[Any]] = {
    "ack_timeout": [0],
    "max_redeliveries": [0, 1, 2, 3, 4, 5],
    "backoff_base": [0],
    "backoff_max": [0],
    "poison_policy": ["dead-letter"],
    "persist_interval": [0],
    "persist_ack_holes": [False],
    "evict_after": [1, 2, 3, 4, 5, 6],
    # procrastinate keeps one attempt counter: `retry_job` adds one whether a failure, a stopping worker's retry
    # strategy or the stalled-job recovery retried the job (spec section 21.1: a declared departure)
    "returns_as_failures": [True],
}
"""Values of each configuration field this adapter honours (protocol v2 `config_values`); it also takes any other
`max_redeliveries` >= 0 and `evict_after` >= 1. `window` and `points` have none: procrastinate has neither."""

DEFAULTS: dict[str, Any] = {
    "profile": "strict",
    "selector": "any",
    "ack_timeout": 0,
    "max_redeliveries": 5,
    "backoff_base": 0,
    "backoff_max": 0,
    "poison_policy": "dead-letter",
    "persist_interval": 0,
    "persist_ack_holes": False,
    "evict_after": 6,
    "returns_as_failures": True,
}
"""An omitted field: the spec's default where this adapter honours it, otherwise the one value it supports."""

FIELDS = (*DEFAULTS, "window", "points", "bucket_budget", "bucket_max")

CAPABILITIES: dict[str, Any] = {
    "profiles": ["strict"],
    "selectors": ["any"],
    "ops": ["publish", "add_consumer", "remove_consumer", "disconnect", "ack", "nack", *ZOMBIE_OPS, "tick", "restart"],
    "filters": False,
    "ack_timeout": False,
    "poison_policies": ["dead-letter"],
    "persist_ack_holes": False,
    "held_events": False,
    "stats": False,
    "batch": False,
    "deterministic": True,
    "interactive": True,
    "flow_control": True,
    "capacity": True,
    "window": False,
    "cursor": False,
    "durable_attempts": True,  # the job's `attempts` column: deliveries and failures survive a restart
    "config_values": CONFIG_VALUES,
    "terminal_outcomes": OUTCOMES,
}

PRUNE_BEFORE = (
    "SELECT * FROM procrastinate_prune_stalled_workers_v1(extract(epoch FROM now() - %(cutoff)s::timestamptz)::float8)"
)
"""procrastinate's own pruning function, with `seconds_since_heartbeat` computed in the same statement so that
the heartbeat cutoff is exactly the start of a given tick (a tick is one heartbeat interval)."""
NO_STALE_WORKER = 10 * 365 * 24 * 3600.0
"""After pruning, stalled jobs are the ones whose worker is gone: no heartbeat is ever this old."""


class Refused(Exception):
    """A refusal the protocol defines: nothing happened."""

    def __init__(self, code: str, message: str, field_name: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.field_name = code, message, field_name


class JobFailed(Exception):
    """What the task raises when the kit's consumer nacks its job."""


@dataclass
class Worker:
    """One kit consumer: a procrastinate worker with `concurrency = capacity`."""

    name: str
    worker_id: int
    capacity: int
    connected: bool = True
    running: dict[int, jobs_module.Job] = field(default_factory=dict)
    """The jobs it is running, by offset (the worker's own in-memory view)."""


class ProcrastinateAdapter:
    """The adapter protocol's in-process methods, driving procrastinate through its App and JobManager."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.loop = asyncio.new_event_loop()
        self.version = 1
        self.app: procrastinate.App | None = None
        self.task: Any = None
        self.config: dict[str, Any] = {}
        self.workers: dict[str, Worker] = {}
        self.job_ids: dict[int, int] = {}
        self.ended: dict[tuple[int, int], tuple[str, jobs_module.Job]] = {}
        """(offset, attempt) of each delivery that ended since the last restart: the worker it went to and the job as
        that worker holds it, which a late result of that worker names (`zombie_ack`, `zombie_nack`)."""
        self.published = 0
        self.now = 0
        self.beats: list[datetime] = []
        """The database's clock at the start of each tick's heartbeat round (index: the tick)."""

    # --- the protocol -----------------------------------------------------------------------------------

    def start(self, version: int = 1) -> dict[str, Any]:
        """Who we are and what we support, in the protocol version the kit asked for."""
        self.version = version
        implementation = {
            "name": "procrastinate",
            "version": metadata.version("procrastinate"),
            "language": "python",
            "homepage": "https://github.com/procrastinate-org/procrastinate",
            "source": "keyshared: conformance/adapters/procrastinate",
        }
        return {"version": version, "implementation": implementation, "capabilities": CAPABILITIES}

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A fresh subscription: procrastinate's tables emptied, a new App whose task retries as configured."""
        try:
            self.config = parse_config(config)
        except Refused as refusal:
            return {
                "ok": False,
                "error": {"code": refusal.code, "message": refusal.message, "field": refusal.field_name},
            }
        self._run(self._reset())
        return {"ok": True, "events": []}

    def op(self, op: Mapping[str, Any]) -> dict[str, Any]:
        """Perform one op, then a dispatch pass; its effect events or a refusal."""
        if self.app is None:
            return {"errored": True, "context": {"message": "op before reset: no subscription exists yet"}}
        name = op.get("op")
        handler = getattr(self, f"_op_{name}", None)
        if handler is None:
            return {"skipped": True, "message": f"procrastinate has nothing that {name!r} maps to"}
        try:
            events: list[dict[str, Any]] = self._run(handler(op))
        except Refused as refusal:
            return {"ok": False, "error": {"code": refusal.code, "message": refusal.message}}
        return {"ok": True, "events": events}

    def stats(self) -> dict[str, Any]:
        """Not supported (the `stats` capability is false)."""
        return {"errored": True, "context": {"message": "the procrastinate adapter has no stats"}}

    def stop(self) -> None:
        """Close the connection pool and the event loop."""
        if self.app is not None:
            self._run(self.app.close_async())
            self.app = None
        if not self.loop.is_closed():
            self.loop.close()

    # --- plumbing ---------------------------------------------------------------------------------------

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    @property
    def manager(self) -> Any:
        assert self.app is not None
        return self.app.job_manager

    async def _open(self) -> None:
        """A new application process: a new App with its own pool, and the task as a user would declare it."""
        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=self.dsn))
        retries = int(self.config["max_redeliveries"])

        @app.task(name=TASK_NAME, retry=retries, pass_context=False)
        async def process(offset: int) -> None:
            """The job's body is the kit's consumer: it never runs in this process."""

        await app.open_async()
        self.app, self.task = app, process

    async def _reset(self) -> None:
        if self.app is not None:
            await self.app.close_async()
            self.app = None
        await self._open()
        if not await self.manager.check_connection_async():
            assert self.app is not None
            await self.app.schema_manager.apply_schema_async()
        await self._execute(
            "TRUNCATE procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs, procrastinate_workers "
            "RESTART IDENTITY CASCADE"
        )
        self.workers, self.job_ids, self.ended, self.published, self.now = {}, {}, {}, 0, 0
        self.beats = [await self._db_now()]

    async def _execute(self, query: Any) -> None:
        assert self.app is not None
        await self.app.connector.execute_query_async(query)

    async def _sql(self, query: Any, **arguments: Any) -> list[dict[str, Any]]:
        assert self.app is not None
        rows: list[dict[str, Any]] = await self.app.connector.execute_query_all_async(query, **arguments)
        return rows

    async def _db_now(self) -> datetime:
        rows = await self._sql("SELECT now() AS now")
        now: datetime = rows[0]["now"]
        return now

    def _member(self, op: Mapping[str, Any]) -> Worker:
        worker = self.workers.get(str(op.get("consumer")))
        if worker is None:
            raise Refused("unknown_consumer", f"no member named {op.get('consumer')!r}")
        return worker

    def _outcome(
        self, offset: int, key: str, status: str, consumer: str, attempt: int, reason: str
    ) -> list[dict[str, Any]]:
        """A terminal status outside the spec's vocabulary: an `outcome` event (v2); in v1 only `failed` has a name."""
        if self.version >= 2:
            return [{"event": "outcome", "offset": offset, "key": key, "reason": status, "consumer": consumer}]
        if OUTCOMES.get(status) == "dead_lettered":
            return [{"event": "dead_letter", "offset": offset, "key": key, "attempt": attempt, "reason": reason}]
        return []

    async def _dispatch(self) -> list[dict[str, Any]]:
        """Every connected worker with a free slot fetches a job, as its loop does, until none is left."""
        events: list[dict[str, Any]] = []
        while True:
            fetched = False
            for worker in list(self.workers.values()):
                if not worker.connected or len(worker.running) >= worker.capacity:
                    continue
                job = await self.manager.fetch_job(queues=None, worker_id=worker.worker_id)
                if job is None:
                    return events  # no worker filters queues: what one cannot fetch, none can
                offset = int(job.task_kwargs["offset"])
                worker.running[offset] = job
                events.append(
                    {
                        "event": "deliver",
                        "offset": offset,
                        "key": job.lock,
                        "consumer": worker.name,
                        "attempt": job.attempts + 1,
                    }
                )
                fetched = True
            if not fetched:
                return events

    async def _prune(self) -> list[dict[str, Any]]:
        """The stalled-worker task: workers without a heartbeat for `evict_after` ticks are pruned."""
        cutoff = self.beats[max(0, self.now - int(self.config["evict_after"]) + 1)]
        rows = await self._sql(PRUNE_BEFORE, cutoff=cutoff)
        pruned = {int(row["worker_id"]) for row in rows}
        events = []
        for worker in list(self.workers.values()):
            if worker.worker_id in pruned:
                self._end_all(worker)
                del self.workers[worker.name]
                events.append({"event": "consumer_evicted", "consumer": worker.name})
        return events

    def _ended(self, worker: Worker, job: jobs_module.Job) -> None:
        """Remember a delivery that ended: the worker may still report its result late (KS-ACK-3)."""
        self.ended[(int(job.task_kwargs["offset"]), job.attempts + 1)] = (worker.name, job)

    def _end_all(self, worker: Worker) -> None:
        """A worker stopped or pruned: every job it was running is a delivery that ended."""
        for job in worker.running.values():
            self._ended(worker, job)

    async def _job_key(self, offset: int) -> tuple[str | None, str | None]:
        """The job's lock and status, if the offset was published."""
        job_id = self.job_ids.get(offset)
        if job_id is None:
            return None, None
        found = list(await self.manager.list_jobs_async(id=job_id))
        return (found[0].lock, found[0].status) if found else (None, None)

    async def _ignored(self, kind: str, worker: Worker, offset: int) -> list[dict[str, Any]]:
        key, status = await self._job_key(offset)
        reason = "unknown-offset" if key is None else "resolved" if status in TERMINAL_STATUSES else "not-holder"
        event: dict[str, Any] = {"event": kind, "offset": offset, "consumer": worker.name, "reason": reason}
        if key is not None:
            event["key"] = key
        return [event, *await self._dispatch()]

    # --- ops ----------------------------------------------------------------------------------------------

    async def _op_publish(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        offset, key = op.get("offset"), op.get("key")
        if offset != self.published or not isinstance(key, str):
            raise Refused("invalid_argument", f"expected offset {self.published} and a string key")
        self.job_ids[offset] = await self.task.configure(lock=key).defer_async(offset=offset)
        self.published += 1
        return await self._dispatch()

    async def _op_add_consumer(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        name, capacity = str(op.get("consumer")), op.get("capacity")
        if name in self.workers:
            raise Refused("duplicate_consumer", f"{name!r} is a member")
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise Refused("invalid_argument", "capacity must be an integer >= 1")
        if op.get("filters"):
            raise Refused("invalid_argument", "procrastinate workers pick queues, not keys: no key filters")
        events = await self._prune()  # a starting worker prunes stalled workers first, as Worker.run does
        worker_id = await self.manager.register_worker()
        self.workers[name] = Worker(name, int(worker_id), capacity)
        return events + await self._dispatch()

    async def _op_remove_consumer(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A graceful stop whose grace period ran out: running jobs are aborted, then the worker unregisters."""
        worker = self._member(op)
        events: list[dict[str, Any]] = []
        for offset, job in sorted(worker.running.items()):
            retry = self.task.get_retry_exception(exception=asyncio.CancelledError(), job=job)
            try:
                if retry is not None:
                    decision = retry.retry_decision
                    await self.manager.retry_job(
                        job,
                        retry_at=decision.retry_at,
                        priority=decision.priority,
                        queue=decision.queue,
                        lock=decision.lock,
                    )
                else:
                    await self.manager.finish_job(job, status=jobs_module.Status.ABORTED, delete_job=False)
                    events += self._outcome(offset, str(job.lock), "aborted", worker.name, job.attempts + 1, "nack")
            except procrastinate_exceptions.ConnectorException:
                continue  # a late result of an earlier worker already moved the job: procrastinate refuses the abort
        self._end_all(worker)
        await self.manager.unregister_worker(worker.worker_id)
        del self.workers[worker.name]
        return events + await self._dispatch()

    async def _op_disconnect(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The worker stops heartbeating and fetching; its running jobs stay `doing`."""
        self._member(op).connected = False
        return await self._dispatch()

    async def _op_ack(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The job's task returned: the worker finishes it as succeeded."""
        worker, offset = self._member(op), int(op.get("offset", -1))
        job = worker.running.pop(offset, None)
        if job is None:
            return await self._ignored("ack_ignored", worker, offset)
        self._ended(worker, job)
        try:
            await self.manager.finish_job(job, status=jobs_module.Status.SUCCEEDED, delete_job=False)
        except procrastinate_exceptions.ConnectorException:
            return await self._ignored("ack_ignored", worker, offset)  # a late result resolved it first
        return [{"event": "ack", "offset": offset, "key": job.lock, "consumer": worker.name}, *await self._dispatch()]

    async def _op_nack(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The job's task raised: the task's retry strategy retries it, or the worker finishes it as failed."""
        worker, offset = self._member(op), int(op.get("offset", -1))
        job = worker.running.pop(offset, None)
        if job is None:
            return await self._ignored("nack_ignored", worker, offset)
        self._ended(worker, job)
        try:
            events = await self._fail(worker.name, job)
        except procrastinate_exceptions.ConnectorException:
            return await self._ignored("nack_ignored", worker, offset)  # a late result moved it first
        return events + await self._dispatch()

    async def _fail(self, name: str, job: jobs_module.Job) -> list[dict[str, Any]]:
        """What a worker does when its job's task raised: the task's retry strategy retries it, or the worker
        finishes it as failed. The job is the worker's own copy (a zombie's may be stale)."""
        offset, attempt = int(job.task_kwargs["offset"]), job.attempts + 1
        events = [{"event": "nack", "offset": offset, "key": job.lock, "consumer": name, "attempt": attempt}]
        retry = self.task.get_retry_exception(exception=JobFailed("nacked"), job=job)
        if retry is not None:
            decision = retry.retry_decision
            await self.manager.retry_job(
                job, retry_at=decision.retry_at, priority=decision.priority, queue=decision.queue, lock=decision.lock
            )
        else:
            await self.manager.finish_job(job, status=jobs_module.Status.FAILED, delete_job=False)
            events += self._outcome(offset, str(job.lock), "failed", name, attempt, "nack")
        return events

    async def _op_zombie_ack(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A worker that was stopped or pruned as stalled (or answered already) finishes its job late: its task
        returned, so it calls `finish_job` on the job it holds, as its own loop would."""
        name, job = self._ended_delivery(op)
        offset = int(job.task_kwargs["offset"])
        try:
            await self.manager.finish_job(job, status=jobs_module.Status.SUCCEEDED, delete_job=False)
        except procrastinate_exceptions.ConnectorException:
            return await self._late_result_refused("ack_ignored", name, offset)
        return [{"event": "ack", "offset": offset, "key": job.lock, "consumer": name}, *await self._dispatch()]

    async def _op_zombie_nack(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        """As `zombie_ack`, for a task that raised: the late worker retries its job, or finishes it as failed."""
        name, job = self._ended_delivery(op)
        try:
            events = await self._fail(name, job)
        except procrastinate_exceptions.ConnectorException:
            return await self._late_result_refused("nack_ignored", name, int(job.task_kwargs["offset"]))
        return events + await self._dispatch()

    def _ended_delivery(self, op: Mapping[str, Any]) -> tuple[str, jobs_module.Job]:
        """The worker name and job of the ended delivery a zombie op names; invalid_argument if none ended."""
        offset, attempt, name = op.get("offset"), op.get("attempt"), op.get("consumer")
        ended = self.ended.get((offset, attempt)) if isinstance(offset, int) and isinstance(attempt, int) else None
        if ended is None or ended[0] != name:
            why = f"no delivery of offset {offset} (attempt {attempt}) to {name!r} has ended since the last restart"
            raise Refused("invalid_argument", why)
        return ended

    async def _late_result_refused(self, kind: str, name: str, offset: int) -> list[dict[str, Any]]:
        """procrastinate refused a late result (the job is no longer `todo` or `doing`): recorded, nothing else."""
        key, status = await self._job_key(offset)
        reason = "resolved" if status in TERMINAL_STATUSES else "ended"
        event = {"event": kind, "offset": offset, "key": key, "consumer": name, "reason": reason}
        return [event, *await self._dispatch()]

    async def _op_tick(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One heartbeat interval: connected workers beat, then the stalled-job task runs, then dispatch."""
        self.now += 1
        self.beats.append(await self._db_now())
        for worker in self.workers.values():
            if worker.connected:
                await self.manager.update_heartbeat(worker.worker_id)
        events = await self._prune()
        for job in await self.manager.get_stalled_jobs(seconds_since_heartbeat=NO_STALE_WORKER):
            await self.manager.retry_job(job)
        return events + await self._dispatch()

    async def _op_restart(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every worker process and the application crash and start again: nothing is written on the way down."""
        assert self.app is not None
        await self.app.close_async()
        self.app, self.workers, self.ended = None, {}, {}
        await self._open()
        self.job_ids = {int(job.task_kwargs["offset"]): int(job.id) for job in await self.manager.list_jobs_async()}
        self.published = len(self.job_ids)
        return await self._dispatch()


def parse_config(config: Any) -> dict[str, Any]:
    """The configuration with defaults filled in; Refused (invalid_config, naming the field) otherwise."""
    if not isinstance(config, Mapping):
        raise Refused("invalid_config", "the configuration must be a JSON object", "(config)")
    for name in config:
        if name not in FIELDS:
            raise Refused("invalid_config", f"unknown field {name!r}", str(name))
    for name, value in config.items():
        if name in ("profile", "selector"):
            continue
        if name in ("bucket_budget", "bucket_max"):
            raise Refused("invalid_config", f"{name}: only with the buckets selector, which procrastinate lacks", name)
        if not honoured(name, value):
            raise Refused(
                "invalid_config", f"{name}: {value!r} is not supported (supported: {CONFIG_VALUES.get(name, [])})", name
            )
    if config.get("profile", "strict") != "strict":
        raise Refused("invalid_config", "profile: only 'strict' (a lock runs one job at a time)", "profile")
    if config.get("selector", "any") != "any":
        raise Refused("invalid_config", "selector: only 'any' (any worker takes any job)", "selector")
    return {**DEFAULTS, **config}


def honoured(name: str, value: Any) -> bool:
    """True if this adapter honours `value` for field `name` (any count of redeliveries, any eviction delay >= 1)."""
    if name in ("max_redeliveries", "evict_after"):
        lowest = 0 if name == "max_redeliveries" else 1
        return isinstance(value, int) and not isinstance(value, bool) and value >= lowest
    return any(type(value) is type(allowed) and value == allowed for allowed in CONFIG_VALUES.get(name, []))


def dsn_from_environment() -> str:
    """$KS_PROCRASTINATE_DSN, or the DSN of the running private cluster (`postgres.sh status`)."""
    dsn = os.environ.get("KS_PROCRASTINATE_DSN")
    if dsn:
        return dsn
    status = subprocess.run([str(HERE / "postgres.sh"), "status"], capture_output=True, text=True, check=False)
    if status.returncode != 0:
        raise SystemExit(
            f"procrastinate adapter: no DSN: pass --dsn, set KS_PROCRASTINATE_DSN or run {HERE}/postgres.sh start"
        )
    return status.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    """Serve the adapter over stdio."""
    parser = argparse.ArgumentParser(
        description="the keyshared conformance adapter for procrastinate (JSON lines over stdio)"
    )
    parser.add_argument("--dsn", help="the PostgreSQL DSN (default: $KS_PROCRASTINATE_DSN, or postgres.sh status)")
    arguments = parser.parse_args(argv)
    adapter = ProcrastinateAdapter(arguments.dsn or dsn_from_environment())
    return serve_stdio(adapter)  # start(version) answers in the version the kit asked for
