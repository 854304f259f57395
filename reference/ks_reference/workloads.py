"""Workloads for `keyshared simulate`: named scenarios, and workload files of ops (JSON lines).

A workload file holds one JSON object per line: an optional first line
`{"op": "config", "config": {...}}`, then ops in the adapter protocol's vocabulary (spec/
adapter-protocol.md section 3; `publish` may leave out `offset`, `tick` may carry a `count`),
plus `{"op": "settle"}` (drive the run to quiescence and record `quiescent`, optional
`max_ticks`) and `{"op": "quiescent"}` (record the event only). Every line is checked before
anything runs; a bad line is reported as `file:line: field 'name': problem`.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ks_spec.errors import MissingInput, UserError

from ks_reference.simulate import Behaviour, Simulation
from ks_reference.store import Store

Progress = Callable[[int, int], None]
"""Called with (messages published so far, messages to publish)."""


# --- workload files ---

_INT, _STR, _LIST, _OBJ = "integer", "string", "list", "object"
OP_FIELDS: dict[str, dict[str, tuple[str, bool]]] = {
    "config": {"config": (_OBJ, True)},
    "publish": {"key": (_STR, True), "offset": (_INT, False)},
    "add_consumer": {
        "consumer": (_STR, True),
        "capacity": (_INT, True),
        "filters": (_LIST, False),
        "ranges": (_LIST, False),
    },
    "remove_consumer": {"consumer": (_STR, True)},
    "disconnect": {"consumer": (_STR, True)},
    "reconnect": {"consumer": (_STR, True)},
    "ack": {"consumer": (_STR, True), "offset": (_INT, True)},
    "nack": {"consumer": (_STR, True), "offset": (_INT, True)},
    "tick": {"count": (_INT, False)},
    "release": {"key": (_STR, True)},
    "skip": {"key": (_STR, True)},
    "restart": {},
    "rollover": {"segment": (_INT, True), "successor": (_INT, True), "buckets": (_INT, True)},
    "split": {"segment": (_INT, True), "lower": (_INT, True), "upper": (_INT, True)},
    "merge": {"lower": (_INT, True), "upper": (_INT, True), "successor": (_INT, True)},
    "publish_entry": {
        "keys": (_LIST, True),
        "hash_min": (_INT, True),
        "hash_max": (_INT, True),
        "offset": (_INT, False),
    },
    "settle": {"max_ticks": (_INT, False)},
    "quiescent": {},
}
"""Each op's fields: (JSON type, required)."""


@dataclass
class WorkloadFile:
    """A parsed workload file: its configuration (if it has one) and its ops with their line numbers."""

    path: Path
    config: dict[str, Any] | None = None
    ops: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


def _type_ok(value: Any, kind: str) -> bool:
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _STR:
        return isinstance(value, str)
    if kind == _LIST:
        return isinstance(value, list)
    return isinstance(value, dict)


def parse_workload_file(path: Path) -> WorkloadFile:
    """Read and check a workload file; raise UserError naming the line and field of the first problem."""
    if not path.is_file():
        raise MissingInput(f"{path}: no such workload file")
    workload = WorkloadFile(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not valid UTF-8") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            op = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{where}: field '(line)': not valid JSON ({error.msg})") from None
        if not isinstance(op, dict):
            raise UserError(f"{where}: field '(line)': expected a JSON object, got {type(op).__name__}")
        name = op.get("op")
        if name not in OP_FIELDS:
            known = ", ".join(OP_FIELDS)
            raise UserError(f"{where}: field 'op': {name!r} is not an op (known: {known})")
        fields = OP_FIELDS[name]
        for key in op:
            if key != "op" and key not in fields:
                raise UserError(f"{where}: field '{key}': op '{name}' takes no such field")
        for key, (kind, required) in fields.items():
            if key not in op:
                if required:
                    raise UserError(f"{where}: field '{key}': required by op '{name}' but missing")
                continue
            if not _type_ok(op[key], kind):
                raise UserError(f"{where}: field '{key}': must be a JSON {kind}, got {json.dumps(op[key])}")
        for key in ("count", "max_ticks"):
            if key in op and op[key] < 1:
                raise UserError(f"{where}: field '{key}': must be an integer >= 1, got {op[key]}")
        if name == "config":
            if workload.ops or workload.config is not None:
                raise UserError(f"{where}: field 'op': a 'config' line must come first")
            workload.config = op["config"]
            continue
        workload.ops.append((number, op))
    return workload


def run_workload_file(simulation: Simulation, workload: WorkloadFile, progress: Progress | None = None) -> list[str]:
    """Perform a parsed file's ops; returns one warning line per refused op (`file:line: ...`)."""
    warnings: list[str] = []
    total = sum(1 for _, op in workload.ops if op["op"] == "publish")
    published = 0
    for number, op in workload.ops:
        name = op["op"]
        if name == "tick":
            for _ in range(op.get("count", 1)):
                simulation.apply({"op": "tick"})
            continue
        if name == "settle":
            simulation.settle(op.get("max_ticks"))
            continue
        if name == "quiescent":
            simulation.apply_quiescent()
            continue
        refused = len(simulation.refusals)
        simulation.apply(op)
        if len(simulation.refusals) > refused:
            refusal = simulation.refusals[-1][1]
            warnings.append(f"{workload.path}:{number}: op '{name}' refused ({refusal.code}): {refusal.message}")
        if name == "publish":
            published += 1
            if progress is not None:
                progress(published, total)
    return warnings


def write_ops(simulation: Simulation, path: Path) -> None:
    """Write the ops a run performed as a workload file that replays it exactly (all or nothing)."""
    lines: list[dict[str, Any]] = [{"op": "config", "config": simulation.config.as_dict()}, *simulation.ops]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# --- named workloads ---


@dataclass(frozen=True)
class NamedWorkload:
    """A scenario shipped with the reference: its configuration, its poison keys and its script."""

    name: str
    summary: str
    config: dict[str, Any]
    script: Callable[[Simulation, random.Random, int, Progress], None]
    poison: dict[str, str] = field(default_factory=dict)
    default_size: int = 2000


def _keys(rng: random.Random, count: int, prefix: str = "k") -> Callable[[], str]:
    """A skewed key chooser: key i is drawn with weight 1 / (i + 1), like real traffic."""
    names = [f"{prefix}{i}" for i in range(count)]
    weights = [1 / (i + 1) for i in range(count)]
    return lambda: rng.choices(names, weights)[0]


def _publish_for(
    sim: Simulation, size: int, progress: Progress, batch: int, key: Callable[[], str], until: int
) -> None:
    """Publish `batch` messages a tick until `until` messages are published."""
    while len(sim.dispatcher.log) < min(until, size):
        for _ in range(min(batch, size - len(sim.dispatcher.log))):
            sim.publish(key())
        progress(len(sim.dispatcher.log), size)
        sim.tick()


def _sticky_ranges(index: int, count: int) -> list[list[int]]:
    lo = index * 65536 // count
    hi = (index + 1) * 65536 // count - 1
    return [[lo, hi]]


def _steady(sim: Simulation, rng: random.Random, size: int, progress: Progress) -> None:
    sticky = sim.config.selector == "pulsar-sticky"
    for index in range(4):
        ranges = _sticky_ranges(index, 4) if sticky else None
        sim.add_consumer(f"c{index + 1}", 8, Behaviour(delay=1), ranges=ranges)
    _publish_for(sim, size, progress, 8, _keys(rng, 64), size)
    sim.settle()


def _churn(sim: Simulation, rng: random.Random, size: int, progress: Progress) -> None:
    plain = _keys(rng, 48)

    def key() -> str:
        roll = rng.random()
        return f"eu-{plain()}" if roll < 0.2 else f"us-{plain()}" if roll < 0.3 else plain()

    for index in range(3):
        sim.add_consumer(f"c{index + 1}", 6, Behaviour(delay=rng.randint(1, 3)))
    sim.add_consumer("eu", 4, Behaviour(delay=1), filters=["eu-*"])
    joined = 3
    step = max(1, size // 12)
    while len(sim.dispatcher.log) < size:
        _publish_for(sim, size, progress, 6, key, len(sim.dispatcher.log) + step)
        members = [name for name in sim.dispatcher.members if name != "eu"]
        action = rng.choice(("join", "leave", "disconnect")) if len(members) > 1 else "join"
        if action == "join":
            joined += 1
            sim.add_consumer(f"c{joined}", rng.randint(2, 8), Behaviour(delay=rng.randint(1, 3)))
        elif action == "leave":
            sim.remove_consumer(rng.choice(members))
        else:
            sim.disconnect(rng.choice(members))
    joined += 1
    sim.add_consumer(f"c{joined}", 8, Behaviour(delay=1))
    sim.settle()


def _hot_key(sim: Simulation, rng: random.Random, size: int, progress: Progress) -> None:
    for index in range(4):
        sim.add_consumer(f"c{index + 1}", 4, Behaviour(delay=1))
    slow = sim.dispatcher.target_name("hot", None)
    if slow is not None:
        sim.behaviours[slow] = Behaviour(delay=3, per_tick=1)
    cold = _keys(rng, 40, "cold-")
    _publish_for(sim, size, progress, 10, lambda: "hot" if rng.random() < 0.5 else cold(), size)
    sim.settle()


def _poison(sim: Simulation, rng: random.Random, size: int, progress: Progress) -> None:
    for index in range(4):
        sim.add_consumer(f"c{index + 1}", 6, Behaviour(delay=1))
    key = _keys(rng, 32)
    operator = sim.config.poison_policy == "block"
    while len(sim.dispatcher.log) < size:
        _publish_for(sim, size, progress, 8, key, len(sim.dispatcher.log) + 40)
        if operator:
            for blocked in sorted(sim.dispatcher.blocked):
                # an operator skips what hangs and gives a failing key one more chance
                verb = "skip" if sim.poison.get(blocked) == "hang" or rng.random() < 0.5 else "release"
                sim.apply({"op": verb, "key": blocked})
    sim.settle()


def _crash_restart(sim: Simulation, rng: random.Random, size: int, progress: Progress) -> None:
    key = _keys(rng, 64)

    def join_all() -> None:
        for index in range(3):
            sim.add_consumer(f"c{index + 1}", 8, Behaviour(delay=rng.randint(1, 2)))

    join_all()
    for crash_at in (size // 3, 2 * size // 3):
        _publish_for(sim, size, progress, 8, key, crash_at)
        sim.restart()
        sim.tick()  # a tick with no members: the window fills and holds for no-consumer
        join_all()
    _publish_for(sim, size, progress, 8, key, size)
    sim.settle()


def _bucket_rollover(sim: Simulation, rng: random.Random, size: int, progress: Progress) -> None:
    key = _keys(rng, 96)
    sim.add_consumer("c1", 8, Behaviour(delay=2))
    sim.add_consumer("c2", 8, Behaviour(delay=2))
    _publish_for(sim, size, progress, 8, key, size // 4)
    sim.add_consumer("c3", 8, Behaviour(delay=2))  # buckets move to c3 while c1 and c2 still hold some
    _publish_for(sim, size, progress, 8, key, size // 2)
    sim.apply({"op": "rollover", "segment": 0, "successor": 1, "buckets": 8})
    _publish_for(sim, size, progress, 8, key, 3 * size // 4)
    sim.apply({"op": "split", "segment": 1, "lower": 2, "upper": 3})
    _publish_for(sim, size, progress, 8, key, 7 * size // 8)
    sim.remove_consumer("c1")
    _publish_for(sim, size, progress, 8, key, size)
    sim.settle()


def _best_effort(sim: Simulation, rng: random.Random, size: int, progress: Progress) -> None:
    sim.add_consumer("c1", 3, Behaviour(delay=1))
    sim.add_consumer("c2", 3, Behaviour(delay=1))
    sim.add_consumer("c3", 3, Behaviour(delay=2, per_tick=1))
    key = _keys(rng, 48)
    _publish_for(sim, size, progress, 12, key, size // 2)
    sim.disconnect("c2")  # drops with reason inactive until it is evicted
    _publish_for(sim, size, progress, 12, key, size)
    sim.settle()


_POISON_CONFIG = {
    "profile": "strict",
    "ack_timeout": 4,
    "max_redeliveries": 2,
    "backoff_base": 1,
    "backoff_max": 4,
}
_POISON_KEYS = {"k3": "nack", "k7": "hang"}

NAMED_WORKLOADS: dict[str, NamedWorkload] = {
    w.name: w
    for w in (
        NamedWorkload("steady", "4 consumers, 64 skewed keys, every delivery acked a tick later", {}, _steady),
        NamedWorkload(
            "churn",
            "owner profile; consumers join, leave and disconnect (evicted after 3 ticks); one takes only eu-*",
            {"profile": "owner", "evict_after": 3},
            _churn,
        ),
        NamedWorkload(
            "hot-key-slow-consumer",
            "half the traffic on one key whose consumer acks one message a tick; window 64",
            {"window": 64},
            _hot_key,
        ),
        NamedWorkload(
            "poison-drop",
            "k3 is always nacked, k7 never answered (ack timeout 4); poisoned after 2 redeliveries, dropped",
            {**_POISON_CONFIG, "poison_policy": "drop"},
            _poison,
            _POISON_KEYS,
        ),
        NamedWorkload(
            "poison-dead-letter",
            "as poison-drop, but poisoned messages are dead-lettered",
            {**_POISON_CONFIG, "poison_policy": "dead-letter"},
            _poison,
            _POISON_KEYS,
        ),
        NamedWorkload(
            "poison-block",
            "as poison-drop, but a poisoned message blocks its key until the operator releases or skips it",
            {**_POISON_CONFIG, "poison_policy": "block"},
            _poison,
            _POISON_KEYS,
        ),
        NamedWorkload(
            "crash-restart",
            "owner profile, cursor and ack holes persisted every 3 ticks, two crashes; consumers rejoin",
            {"profile": "owner", "persist_interval": 3, "persist_ack_holes": True, "window": 100},
            _crash_restart,
        ),
        NamedWorkload(
            "bucket-rollover",
            "buckets selector: a join moves buckets (handoff), rollover to 8 buckets, a split, a leave",
            {"profile": "owner", "selector": "buckets", "bucket_budget": 4, "bucket_max": 64},
            _bucket_rollover,
        ),
        NamedWorkload(
            "best-effort-saturation",
            "best-effort: capacity 3 channels, one slow consumer (saturated drops), one disconnected (inactive)",
            {"profile": "best-effort", "evict_after": 4},
            _best_effort,
        ),
    )
}


def run_named(
    name: str,
    size: int | None = None,
    seed: int = 1,
    overrides: Mapping[str, Any] | None = None,
    store: Store | None = None,
    progress: Progress | None = None,
) -> Simulation:
    """Run a named workload to quiescence and return the simulation (trace, summary, ops)."""
    if name not in NAMED_WORKLOADS:
        raise UserError(f"no workload named {name!r} (known: {', '.join(NAMED_WORKLOADS)})")
    workload = NAMED_WORKLOADS[name]
    config = {**workload.config, **(overrides or {})}
    if config.get("selector") == "pulsar-sticky" and workload.script is not _steady:
        raise UserError(f"workload '{name}' cannot run with selector pulsar-sticky (only 'steady' declares ranges)")
    if size is not None and size < 1:
        raise UserError(f"--messages must be >= 1, got {size}")
    simulation = Simulation(config, store, poison=workload.poison)
    workload.script(simulation, random.Random(seed), size or workload.default_size, progress or _no_progress)
    return simulation


def _no_progress(done: int, total: int) -> None:
    """The default progress callback: report nothing."""
