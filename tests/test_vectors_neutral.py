"""The vectors of spec/vectors are language-neutral: named by situation, free of import paths, and their `settle`
steps mean what spec/scenario-format.md section 3 says, which the kit's one implementation (ks_conformance.settle)
does, live and in batch mode.

`spec_settle` below is a transcription of that text, as a runner in another language would write it: its own loop
over the state of spec/checking.md section 1 (here read from the kit's checker, as such a runner reads its own).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from typing import Any

import pytest
import vectors_generate
from conformance_mutants import BY_NAME, DOUBLE_MUTANTS, MUTANTS
from ks_conformance.harness import Session
from ks_conformance.protocol import Connection, InProcessConnection
from ks_conformance.scenario import replay
from ks_conformance.tracefile import events_signature
from ks_conformance.vectors import VECTORS_DIR, Vector, find_vectors
from ks_reference.adapter import create as create_reference
from ks_spec.config import CONFIG_DEFAULTS

VECTORS = find_vectors(VECTORS_DIR)
SETTLING = [v for v in VECTORS if any(step.settle is not None for step in v.scenario.steps)]
MUTANT_NAMES = {m.name for m in (*MUTANTS, *DOUBLE_MUTANTS)}

IMPORT_PATH = re.compile(
    r"py:|conformance_mutants|\bks_(conformance|reference|spec|models|spark)\b|\.py\b|\b[a-z_]+(\.[a-z_]+)*:[a-z_]+\b"
)
"""What a header must not hold: an adapter spec, a package or module of this repository, a `module:attribute`."""


# --- names and headers ------------------------------------------------------------------------------


def test_no_vector_is_named_after_a_mutant() -> None:
    parts = {part for name in MUTANT_NAMES for part in name.split("+")}
    spellings = {spelling for name in MUTANT_NAMES | parts for spelling in (name, name.replace("_", "-"))}
    for path in VECTORS_DIR.rglob("*.jsonl"):
        stem = path.name.split(".")[0]
        assert stem not in spellings, f"{path}: named after a mutant, not the situation it tests"


def test_every_vector_name_comes_from_the_generators_map() -> None:
    names = {v.name for v in VECTORS}
    generated = {vectors_generate.situation(source) for source in vectors_generate.SITUATIONS}
    assert names <= generated, sorted(names - generated)
    stems = list(vectors_generate.SITUATIONS.values())
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", stem) for stem in stems), "kebab-case situations"
    assert len(generated) == len(vectors_generate.SITUATIONS), "two sources map to one vector name"


def test_no_header_holds_an_import_path() -> None:
    for vector in VECTORS:
        header = vector.path.read_text(encoding="utf-8").splitlines()[0]
        found = IMPORT_PATH.search(header)
        assert found is None, f"{vector.name}: {found.group(0) if found else ''!r} in its header"
        provenance = json.loads(header).get("found", {})
        assert "adapter" not in provenance and set(provenance.get("mutant", "").split("+")) <= (
            {m for n in MUTANT_NAMES for m in n.split("+")} | {""}
        ), vector.name


def test_the_import_path_pattern_sees_what_it_must() -> None:
    for bad in ('"py:conformance_mutants:no_draining"', '"tests.conformance_mutants.bugs:NoDraining"', "x.py"):
        assert IMPORT_PATH.search(bad), bad
    for fine in ('"mutant":"no_draining"', '"name":"mutant-no_draining"', '"round":"owner/drop round 1"'):
        assert IMPORT_PATH.search(fine) is None, fine


def test_vectors_settle_only_in_portable_orders() -> None:
    orders = {step.settle for v in VECTORS for step in v.scenario.steps if step.settle is not None}
    assert orders <= {"oldest", "newest"}, "`shuffled` is Python's random: no vector may use it"


# --- the settle rule of the text, transcribed ----------------------------------------------------------


class Halt(Exception):
    """The settle halted: no further op, no quiescent point."""


def spec_settle(session: Session, order: str, tolerates: Collection[str]) -> bool:
    """spec/scenario-format.md section 3, step by step; True when it ends unhalted (record `quiescent`)."""
    checker, capabilities = session.checker, session.capabilities
    ops, config = set(capabilities.ops), {**CONFIG_DEFAULTS, **session.config}
    begun = len(session.anomalies)

    def halted() -> bool:
        return session.diverged or any(a.name not in tolerates for a in session.anomalies[begun:])

    def send(op: dict[str, Any]) -> None:
        if halted():
            raise Halt
        session.perform(op, record=False)

    def members() -> list[Any]:
        return list(checker.members.values())

    def progress() -> tuple[int, int]:
        return len(checker.messages) - len(checker.unresolved), checker.persisted_cursor

    def outstanding() -> list[Any]:
        return [d for m in members() for d in m.outstanding.values()]

    def ack_phase() -> None:
        unchanged = 0
        for _ in range(1000):
            deliveries = sorted(outstanding(), key=lambda d: d.seq, reverse=order == "newest")
            if not deliveries or unchanged >= 3:
                return
            before = progress()
            for delivery in deliveries:
                send({"op": "ack", "consumer": delivery.holder.name, "offset": delivery.offset})
            unchanged = unchanged + 1 if progress() == before else 0

    def quiet() -> bool:
        if outstanding():
            return False
        if session.profile == "best-effort":
            return True
        return not checker.unresolved and (not capabilities.cursor or checker.persisted_cursor == len(checker.messages))

    try:
        if "remove_consumer" in ops:
            for member in [m for m in members() if not m.connected]:
                send({"op": "remove_consumer", "consumer": member.name})
        if "add_consumer" in ops:
            capacity = 4 if capabilities.capacity else 1_000_000
            if session.config.get("selector") == "pulsar-sticky":
                covered = sum(hi - lo + 1 for m in members() for lo, hi in m.ranges)
                if covered < 65536 and (not members() or "remove_consumer" in ops):
                    for member in members():
                        send({"op": "remove_consumer", "consumer": member.name})
                    send({"op": "add_consumer", "consumer": "settler", "capacity": capacity, "filters": [],
                          "ranges": [[0, 65535]]})  # fmt: skip
            elif all(m.filters for m in members()):
                full = len(members()) >= capabilities.max_consumers
                if not full or "remove_consumer" in ops:
                    if full:
                        send({"op": "remove_consumer", "consumer": members()[0].name})
                    n = next(n for n in range(1000) if f"settler{n}" not in checker.members)
                    send({"op": "add_consumer", "consumer": f"settler{n}", "capacity": capacity, "filters": []})
        patience = max(
            config["backoff_max"], config["persist_interval"], config["ack_timeout"], config["evict_after"], 1
        )
        idle = 0
        for _ in range(200):
            before = progress()
            if config.get("flow_control") == "permits" and "flow" in ops:
                for member in [m for m in members() if m.permits is not None and m.permits < 1]:
                    send({"op": "flow", "consumer": member.name, "permits": 4})
            ack_phase()
            if "release" in ops:
                for key in sorted(checker.keys):
                    state = checker.keys.get(key)
                    if state is not None and state.blocked:
                        send({"op": "release", "key": key})
                        ack_phase()
            if quiet() or "tick" not in ops:
                break
            send({"op": "tick"})
            idle = idle + 1 if progress() == before else 0
            if idle > int(patience) + 2:
                break
    except Halt:
        return False
    return not halted()


def replay_by_the_text(vector: Vector, connection: Connection) -> list[dict[str, Any]]:
    """The vector's trace, its settle steps done by `spec_settle`."""
    info = connection.start()
    scenario = vector.scenario
    session = Session(connection, info.capabilities, scenario.config, implementation=dict(info.implementation))
    assert session.begin().ok
    for step in scenario.steps:
        if step.settle is not None:
            if spec_settle(session, step.settle, scenario.tolerates):
                session.mark_quiescent()
        elif step.op is not None:
            session.perform(step.op, expect=step.expect)
    return session.trace


def replay_by_the_kit(vector: Vector, connection: Connection, batch: bool) -> list[dict[str, Any]]:
    info = connection.start()
    result = replay(vector.scenario, connection, info.capabilities, dict(info.implementation), batch=batch)
    assert result.session is not None
    return result.session.trace


def _cases() -> list[tuple[Vector, str]]:
    """Every settling vector on the reference, and on the mutant its failing trace comes from."""
    cases = [(v, "reference") for v in SETTLING]
    for vector in SETTLING:
        for trace in vector.traces:
            if trace.implementation.startswith("mutant "):
                cases.append((vector, trace.implementation.removeprefix("mutant ")))
    return cases


def _connection(name: str) -> Callable[[], Connection]:
    if name == "reference":
        return lambda: InProcessConnection(create_reference(), "reference")
    return lambda: InProcessConnection(BY_NAME[name].create(), name)


@pytest.mark.parametrize(("vector", "implementation"), _cases(), ids=lambda x: x if isinstance(x, str) else x.name)
def test_the_text_and_the_kit_settle_alike(vector: Vector, implementation: str) -> None:
    """The transcription of the text, the kit live and the kit in batch mode send the same ops: the same events."""
    connect = _connection(implementation)
    by_text = events_signature(replay_by_the_text(vector, connect()))
    live = events_signature(replay_by_the_kit(vector, connect(), batch=False))
    batch = events_signature(replay_by_the_kit(vector, connect(), batch=True))
    assert by_text == live, f"{vector.name} on {implementation}: the text and the kit differ"
    assert batch == live, f"{vector.name} on {implementation}: batch mode settles otherwise"
