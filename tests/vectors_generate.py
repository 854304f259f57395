"""Generate the conformance vector corpus (spec/vectors/) from the mutants' shrunk scenarios: on demand, never in tests.

    .venv/bin/python tests/vectors_generate.py search   # the ci suite against every single mutant (minutes)
    .venv/bin/python tests/vectors_generate.py build    # curate, minimise, judge, record traces, write the corpus

`search` saves each mutant's findings under build/vectors-search/<mutant>/ (as `make test-mutants` does in a
temporary folder). `build` picks, for each requirement a mutant must break, the smallest saved scenario that the
reference passes and the mutant fails with a kind of that requirement (and only kinds inside the mutant's
must | may | warns), deletes steps while that stays true, replays the result against every mutant to record who
fails it, records the reference's (passing) and the mutant's (failing) traces with what `check-trace` says of
them, and rewrites spec/vectors/. The checked-in files are the frozen corpus; tests/test_vectors.py judges it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from conformance_mutants import BY_NAME, DOUBLE_MUTANTS, MUTANTS, Mutant
from conformance_mutants.judge import NOT_REPLAYABLE, judge
from ks_conformance.harness import Step
from ks_conformance.protocol import Capabilities, Connection, InProcessConnection
from ks_conformance.rules import RULES, rules_of
from ks_conformance.scenario import Scenario, read_scenario
from ks_conformance.suite import INVALID_CONFIGS
from ks_conformance.tracefile import check_trace
from ks_conformance.vectors import VECTOR_SUFFIX, VECTORS_DIR, Vector, VectorResult, _id_order, find_vectors, run_vector
from ks_reference.adapter import create as create_reference
from ks_spec.trace import write_trace

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "vectors-search"

EXTRA_TARGETS: dict[str, tuple[str, ...]] = {
    "drain_never_clears": ("KS-DRN-2",),
    "cursor_tail_unflushed": ("KS-LIV-2",),
}
"""Requirements a mutant may break that no mutant must (spec/checking.md: judged at quiescence, which a live run
reaches with the violation already shown by another check): their vectors settle past that other check."""

KEPT_CONFIG = (
    "profile",
    "selector",
    "poison_policy",
    "read_trigger",
    "timer_slack",
    "persist_trigger",
    "persist_flush",
)
"""Configuration fields a vector always states: what an adapter must declare to take it (a default poison policy
would make a vector need `block` without saying so), and the heartbeat options it was found under (KS-GEN-8,
KS-GEN-9: a late timer is the vector's point only next to the slack it exceeds), and the debounce options (KS-CUR-12:
a write is late only by the rule it was declared under)."""

HANDMADE = {"KS-CFG-1", "KS-GEN-5"}
"""Requirements whose vectors are hand-made: a refused configuration has no steps (the suite's probes), and
nondeterminism shows only across two runs."""

SITUATIONS: dict[str, str] = {
    "KS-ACK-1/disconnected_acks_ignored": "ack-from-disconnected-holder",
    "KS-ACK-1/first_ack_lost": "ack-of-a-redelivery",
    "KS-ACK-2/leave_counts_as_ack": "holder-leaves-unacked",
    "KS-ACK-2/stale_ack_accepted": "ack-from-previous-owner",
    "KS-ACK-3/zombie_ack_accepted": "late-ack-after-leave",
    "KS-ACK-3/ack_by_id_ignored": "late-ack-by-id-after-leave",
    "KS-ACK-3/ack_by_id_keeps_delivering": "late-ack-by-id-resolves-once",
    "KS-RES-2/ack_by_id_keeps_delivering": "late-ack-by-id-no-redelivery",
    "KS-ORD-5/delayed_delivered_early": "delayed-message-before-its-due-tick",
    "KS-ORD-6/delayed_blocks_key": "later-message-behind-a-delayed-one",
    "KS-ORD-7/delayed_never_due": "delayed-message-past-its-due-tick",
    "KS-CUR-8/seek_keeps_acked": "backwards-seek-replays-acked",
    "KS-CUR-9/seek_resurrects": "forwards-seek-gives-up-read",
    "KS-CUR-10/seek_not_persisted": "seek-persisted-before-debounce",
    "KS-CUR-11/seek_accepts_old_acks": "ack-of-delivery-the-seek-ended",
    "KS-ASN-1/per_message_routing": "key-routed-within-one-epoch",
    "KS-ASN-2/modulo_ring": "join-keeps-other-keys-in-place",
    "KS-ASN-2/partitions_rebalanced_on_join": "join-takes-no-partition",
    "KS-ASN-2/per_message_routing": "key-routed-again-after-rest",
    "KS-BEF-1/best_effort_redelivers": "best-effort-holder-leaves",
    "KS-BEF-2/drops_uncounted": "best-effort-drop-counted",
    "KS-BKT-1/bucket_off_by_one": "message-placed-by-hash",
    "KS-BKT-10/batch_split": "batch-delivered-whole",
    "KS-BKT-10/key_batch_split": "key-batch-past-capacity",
    "KS-BKT-3/owners_reversed": "bucket-owners-by-name-order",
    "KS-BKT-4/no_handoff": "bucket-moves-while-held",
    "KS-BKT-5/merge_waits_for_one": "merge-with-upper-predecessor-busy",
    "KS-BKT-5/successor_first": "split-with-predecessor-busy",
    "KS-BKT-6/checkpoint_ahead": "checkpoint-behind-unresolved",
    "KS-BKT-8/sticky_in_name": "sticky-buckets-on-join",
    "KS-BKT-9/checkpoints_ignored_at_restart": "restart-from-bucket-checkpoints",
    "KS-CFG-1/backoff_base": "backoff-base-above-max",
    "KS-CFG-1/bucket_budget": "bucket-budget-without-buckets",
    "KS-CFG-1/frobnicate": "unknown-field",
    "KS-CFG-1/max_redeliveries": "negative-max-redeliveries",
    "KS-CFG-1/profile": "unknown-profile",
    "KS-CFG-1/window": "zero-window",
    "KS-CUR-1/cursor_at_highest_ack": "ack-past-a-hole",
    "KS-CUR-1/one_checkpoint_for_all": "restart-with-uneven-bucket-checkpoints",
    "KS-CUR-2/stale_cursor_write": "cursor-written-repeatedly",
    "KS-CUR-3/restart_keeps_volatile_acks": "restart-before-acks-persist",
    "KS-CUR-4/cursorless_forgetful": "cursorless-restart-after-acks",
    "KS-CUR-4/holes_reread": "restart-with-persisted-holes",
    "KS-CUR-5/cursor_tail_unflushed": "one-ack-then-quiescence",
    "KS-CUR-5/persist_on_tick_only": "ack-with-zero-persist-interval",
    "KS-CUR-5/advance_written_at_tick": "move-due-under-advance-trigger",
    "KS-ACK-2/ack_by_consumer_name": "ack-from-a-namesake-of-the-holder",
    "KS-CUR-5/flush_never_runs": "move-held-until-flush-tick",
    "KS-CUR-7/persist_eagerly": "ack-within-persist-interval",
    "KS-DRN-1/no_draining": "join-while-key-outstanding",
    "KS-DRN-2/drain_never_clears": "drain-then-settle",
    "KS-DRN-2/drain_unmoved_hash": "hash-held-though-slot-did-not-move",
    "KS-FLT-2/filters_ignored": "ring-target-filters-key-out",
    "KS-FLT-3/never_filters": "no-member-accepts-key",
    "KS-FLT-3/target_filters": "another-member-accepts-key",
    "KS-FLT-4/filter_when_empty": "publish-with-no-consumer",
    "KS-FLW-1/capacity_ignored": "consumer-at-capacity",
    "KS-FLW-1/sent_twice": "first-delivery-at-capacity-one",
    "KS-FLW-2/outstanding_parked": "parking-with-outstanding-head",
    "KS-FLW-2/window_overread": "window-full",
    "KS-FLW-3/held_overtaken": "held-message-freed",
    "KS-FLW-4/permits_overdrawn": "permits-used-up",
    "KS-FLW-4/batch_charged_one_permit": "batch-takes-permits-below-zero",
    "KS-GEN-4/duplicate_name_accepted": "join-under-a-taken-name",
    "KS-GEN-4/publish_crashes_after_nack": "publish-rejected-by-the-system",
    "KS-GEN-5/one-pass-eight-keys": "one-pass-eight-keys",
    "KS-GEN-7/danube_order_undeclared": "retry-ready-with-eviction-due",
    "KS-GEN-7/dispatch_before_eviction": "eviction-and-dispatch-in-one-tick",
    "KS-ISO-1/any_busy_first": "first-member-busy",
    "KS-ISO-1/drain_never_clears": "drained-key-published-again",
    "KS-ISO-1/hash_drain_everything": "other-key-draining",
    "KS-ISO-1/head_of_line": "held-key-ahead-in-pass",
    "KS-ISO-1/heartbeat_skipped": "heartbeat-reads-what-was-freed",
    "KS-ISO-1/lookahead_stops_early": "look-ahead-to-its-limit",
    "KS-ISO-1/parking_ignored": "parked-messages-and-read-bound",
    "KS-LIV-1/dropped_key_stranded": "poison-drop-with-key-queue",
    "KS-LIV-1/lost_on_leave": "holder-leaves-then-quiescence",
    "KS-LIV-1/stats_now_lags+dropped_key_stranded": "poison-drop-with-key-queue-past-stats",
    "KS-LIV-2/cursor_tail_unflushed": "odd-number-of-acks",
    "KS-MEM-1/lost_on_leave": "holder-leaves",
    "KS-MEM-2/dispatch_before_eviction": "eviction-due-with-backlog",
    "KS-MEM-2/early_eviction": "disconnected-until-evict-after",
    "KS-MEM-3/disconnected_served": "publish-to-disconnected-member",
    "KS-MEM-4/reconnect_ignored": "reconnect-before-eviction",
    "KS-OBS-1/stats_miscount": "stats-after-redelivery",
    "KS-OBS-1/stats_now_lags": "stats-after-a-tick",
    "KS-OBS-2/blocked_keys_hidden": "stats-with-blocked-key",
    "KS-ORD-1/held_overtaken": "held-head-then-room",
    "KS-ORD-1/newest_first": "backlog-behind-held-head",
    "KS-ORD-2/strict_pipelines": "strict-second-message-before-ack",
    "KS-ORD-3/lost_on_leave": "holder-leaves-with-key-queue",
    "KS-ORD-3/retry_behind": "retry-backoff-with-key-queue",
    "KS-POI-2/dead_letter_attempt": "dead-letter-after-redeliveries",
    "KS-POI-3/blocked_leak": "blocked-key-with-queue",
    "KS-POI-3/poison_one_early": "failures-at-max-redeliveries",
    "KS-POI-4/release_keeps_budget": "release-after-block",
    "KS-POI-5/skip_ignored": "skip-blocked-message",
    "KS-RES-1/drop_on_first_failure": "first-failure",
    "KS-RES-1/outcome_undeclared": "poisoned-message-outcome",
    "KS-RES-2/best_effort_redelivers": "best-effort-leave-no-duplicate",
    "KS-RES-2/holes_reread": "restart-no-duplicate-of-holes",
    "KS-RES-2/sent_twice": "first-delivery-once",
    "KS-RTY-1/stale_nack_accepted": "nack-from-non-holder",
    "KS-RTY-2/early_timeout": "ack-timeout-not-yet-due",
    "KS-RTY-2/times_out_without_timers": "timeout-with-timers-declared-absent",
    "KS-RTY-3/late_timeout": "ack-timeout-due",
    "KS-RTY-3/timers_too_late": "ack-timeout-due-within-the-slack",
    "KS-RTY-4/no_backoff": "nack-then-backoff",
    "KS-RTY-5/attempt_reset": "attempts-across-redeliveries",
    "KS-RTY-6/retry_forever": "failures-past-max-redeliveries",
    "KS-RTY-7/returns_count_as_failures": "returns-are-not-failures",
    "KS-RTY-6/declared_returns_uncounted": "declared-returns-are-failures",
    "KS-RTY-8/extend_ignored": "extension-moves-the-deadline",
    "KS-RTY-9/extend_by_zombie": "extension-from-a-non-holder",
    "KS-BKT-3/controller_moves_unannounced": "controller-move-unannounced",
    "KS-ISO-1/unacked_resumes_when_empty": "unacked-limit-resumes-at-half",
    "KS-ASN-1/out_of_order_per_message": "out-of-order-still-routes-by-key",
    "KS-BKT-1/reported_layout_misroutes": "message-routed-by-reported-split-point",
    "KS-BKT-11/reported_layout_invalid": "split-children-partition-the-parent",
}
"""Every vector's file name, by what it comes from (`<requirement>/<mutant>`, or `KS-CFG-1/<refused field>` and
`KS-GEN-5/one-pass-eight-keys` for the hand-made ones): the situation it tests, never a mutant's name
(spec/vectors/README.md section 1). A new vector needs its entry here; `build` stops without one."""


def situation(source: str) -> str:
    """The vector name (`KS-DRN-1/join-while-key-outstanding`) for what it comes from (`KS-DRN-1/no_draining`)."""
    if source not in SITUATIONS:
        raise SystemExit(f"{source}: no name for its situation: add one to SITUATIONS in tests/vectors_generate.py")
    return f"{source.split('/')[0]}/{SITUATIONS[source]}"


GENERATED_BEGIN = "<!-- corpus: generated by tests/vectors_generate.py, do not edit by hand -->"
GENERATED_END = "<!-- end of corpus -->"


# --- search ------------------------------------------------------------------------------------------


def _extend_path(path: list[str]) -> None:
    for entry in path:
        if entry not in sys.path:
            sys.path.append(entry)


def search(names: list[str], jobs: int, seed: int) -> None:
    """Run the ci suite against each named mutant, saving its findings under build/vectors-search/<name>/."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_extend_path, initargs=(sys.path,)) as pool:
        futures = {}
        for name in names:
            folder = CACHE / name
            if (folder / "done.json").is_file():
                continue
            shutil.rmtree(folder, ignore_errors=True)
            futures[name] = pool.submit(judge, name, str(folder), seed)
        for name, future in futures.items():
            judged = future.result()
            (CACHE / name / "done.json").write_text(
                json.dumps({"failed": sorted(judged.failed), "seconds": round(judged.seconds, 1), "seed": seed}) + "\n"
            )
            print(f"{name}: failed {sorted(judged.failed)} in {judged.seconds:.0f} s", flush=True)


# --- judging one candidate -------------------------------------------------------------------------


class Judge:
    """Started in-process connections (one per adapter, reused: every replay begins with a reset)."""

    def __init__(self) -> None:
        self.connections: dict[str, tuple[Connection, Capabilities, dict[str, Any]]] = {}

    def factory(self, name: str) -> Callable[[], Connection]:
        if name == "reference":
            return lambda: InProcessConnection(create_reference(), "reference")
        mutant = BY_NAME[name]
        return lambda: InProcessConnection(mutant.create(), f"py:conformance_mutants:{name}")

    def run(self, name: str, vector: Vector) -> VectorResult:
        if name not in self.connections:
            connection = self.factory(name)()
            info = connection.start()
            self.connections[name] = (connection, info.capabilities, dict(info.implementation))
        connection, capabilities, implementation = self.connections[name]
        return run_vector(vector, connection, capabilities, implementation, self.factory(name))


def allowed(mutant: Mutant) -> set[str]:
    """The anomaly kinds a mutant may show: those of its must, may and warns requirements."""
    requirements = mutant.catches | mutant.may | mutant.warns
    return {kind.name for kind in RULES if kind.requirement in requirements}


def draft(scenario: Scenario, targets: tuple[str, ...], kinds: tuple[str, ...] = ()) -> Vector:
    """An in-memory vector around a scenario (no file yet)."""
    own = kinds or tuple(k.name for t in targets for k in rules_of(t))
    return Vector(Path("draft"), "draft", scenario, targets, own, (), ())


@dataclass
class Candidate:
    scenario: Scenario
    kinds: list[str]
    """What the mutant's replay showed."""


def judge_candidate(judges: Judge, mutant: Mutant, target: str, scenario: Scenario) -> Candidate | None:
    """The scenario, if the reference passes it (non-vacuously) and the mutant fails it on `target` within bounds."""
    vector = draft(scenario, (target,))
    reference = judges.run("reference", vector)
    if reference.status != "passed":
        return None
    broken = judges.run(mutant.name, vector)
    shown = set(broken.kinds)
    if broken.status not in ("failed", "warning") or not shown & set(vector.kinds) or not shown <= allowed(mutant):
        return None
    return Candidate(scenario, sorted(shown))


def without(steps: list[Step], index: int) -> list[Step]:
    """The steps without one; later offsets are renumbered when the removed step was a publish."""
    removed = steps[index].op
    rest = steps[:index] + steps[index + 1 :]
    if removed is None or removed.get("op") != "publish":
        return rest
    gone = int(removed["offset"])
    renumbered = []
    for step in rest:
        if step.op is not None and isinstance(step.op.get("offset"), int) and step.op["offset"] > gone:
            step = replace(step, op={**step.op, "offset": step.op["offset"] - 1})
        renumbered.append(step)
    return renumbered


def smaller(scenario: Scenario) -> Iterator[Scenario]:
    """Each scenario one deletion smaller: a step (last first), a tolerated kind, a configuration field left default."""
    for index in reversed(range(len(scenario.steps))):
        yield replace(scenario, steps=without(scenario.steps, index))
    for kind in scenario.tolerates:
        yield replace(scenario, tolerates=[k for k in scenario.tolerates if k != kind])
    for name in scenario.config:
        if name not in KEPT_CONFIG:
            yield replace(scenario, config={k: v for k, v in scenario.config.items() if k != name})


def minimise(judges: Judge, mutant: Mutant, target: str, found: Candidate) -> Candidate:
    """Delete what can go (steps, tolerated kinds, configuration fields) while the candidate stays a vector."""
    best = found
    changed = True
    while changed:
        changed = False
        for trial in smaller(best.scenario):
            better = judge_candidate(judges, mutant, target, trial)
            if better is not None:
                best, changed = better, True
                break
    return best


def variants(scenario: Scenario, mutant: Mutant, target: str) -> Iterator[Scenario]:
    """The ways to use a saved scenario for `target`: as found, without tolerances, settled past other kinds."""
    plain = replace(scenario, tolerates=[], covers=[target])
    yield plain
    if scenario.tolerates:
        yield replace(plain, tolerates=list(scenario.tolerates))
    own = {kind.name for kind in rules_of(target)}
    others = sorted(allowed(mutant) - own)
    settled = plain.steps if plain.steps and plain.steps[-1].settle else [*plain.steps, Step(settle="oldest")]
    yield replace(plain, steps=settled, tolerates=others)
    for name in plain.config:  # a field whose drawn value shows another bug as well (left at its default)
        if name not in KEPT_CONFIG:
            yield replace(plain, config={k: v for k, v in plain.config.items() if k != name})


def returned_once() -> Scenario:
    """A delivery returned by its holder's leave, then failed once with one redelivery allowed: a return is not a
    failure (KS-RTY-7)."""
    steps = [
        Step(op={"op": "add_consumer", "consumer": "c1", "capacity": 1, "filters": []}),
        Step(op={"op": "publish", "offset": 0, "key": "k0"}),
        Step(op={"op": "remove_consumer", "consumer": "c1"}),
        Step(op={"op": "add_consumer", "consumer": "c2", "capacity": 1, "filters": []}),
        Step(op={"op": "nack", "consumer": "c2", "offset": 0}),
        Step(op={"op": "tick"}),
        Step(settle="oldest"),
    ]
    return Scenario({"profile": "owner", "selector": "ring", "max_redeliveries": 1, "poison_policy": "drop"}, steps)


SEEDS: dict[str, Callable[[], Scenario]] = {"returns_count_as_failures": returned_once}
"""Hand-written scenarios for mutants whose ci search is slow to find their bug (minutes under load)."""


def saved_scenarios(name: str) -> list[Scenario]:
    """The replayable scenarios the search saved for one mutant (and its seed), fewest steps first; a double
    mutant's are those of its parts."""
    if "+" in name:
        return sorted((s for part in name.split("+") for s in saved_scenarios(part)), key=lambda s: len(s.steps))
    folder = CACHE / name
    if (folder / "done.json").is_file():
        scenarios = [read_scenario(path) for path in sorted(folder.glob("*.jsonl"))]
    elif REUSE_CORPUS:
        scenarios = corpus_scenarios(name)
    elif name not in SEEDS:
        raise SystemExit(f"{name}: not searched yet (run: tests/vectors_generate.py search, or build --reuse-corpus)")
    else:
        scenarios = []
    if name in SEEDS:
        scenarios.append(SEEDS[name]())
    usable = [s for s in scenarios if s.steps and not set(s.anomalies) & NOT_REPLAYABLE]
    return sorted(usable, key=lambda s: len(s.steps))


REUSE_CORPUS = False
"""`build --reuse-corpus`: a mutant not searched takes the scenarios of the corpus vectors it fails (set by main)."""


CHECKED_IN: list[Vector] = []
"""The corpus as checked in, read once (`build` rewrites the folder after curating)."""


def checked_in() -> list[Vector]:
    """The checked-in vectors (none if the corpus folder is missing)."""
    if not CHECKED_IN and VECTORS_DIR.is_dir():
        CHECKED_IN.extend(find_vectors(VECTORS_DIR))
    return CHECKED_IN


def corpus_scenarios(name: str) -> list[Scenario]:
    """The scenarios of the checked-in vectors that the mutant fails: those it was found on first, then the rest.

    Regenerating after a change that leaves most mutants alone (a new check, a new mutant) then needs a search of
    the changed mutants only; every vector is judged again by today's checker before it is kept.
    """
    vectors = checked_in()
    own = [v for v in vectors if (v.scenario.found or {}).get("mutant") == name]
    caught = [v for v in vectors if v not in own and any(c.mutant == name for c in v.caught)]
    return [v.scenario for v in (*own, *caught) if v.scenario.steps]


def kept_vector(judges: Judge, mutant: Mutant, target: str) -> Candidate | None:
    """`build --reuse-corpus`, for a mutant not searched again: its checked-in vector of `target` as it is, if the
    mutant still fails it there (and the reference passes it), so that a rebuild rewrites no vector it need not."""
    if not REUSE_CORPUS or (CACHE / mutant.name / "done.json").is_file():
        return None
    source = f"{target}/{mutant.name}"
    if source not in SITUATIONS:
        return None
    name = situation(source)
    kept = next((v for v in checked_in() if v.name == name and v.scenario.steps), None)
    return None if kept is None else judge_candidate(judges, mutant, target, kept.scenario)


def curate(judges: Judge, mutant: Mutant, target: str) -> Candidate | None:
    """The smallest vector of `target` that the mutant's saved scenarios give, minimised (with `--reuse-corpus`, the
    checked-in one while it still holds)."""
    kept = kept_vector(judges, mutant, target)
    if kept is not None:
        return kept
    for scenario in saved_scenarios(mutant.name):
        for variant in variants(scenario, mutant, target):
            found = judge_candidate(judges, mutant, target, variant)
            if found is not None:
                return minimise(judges, mutant, target, found)
    return None


# --- hand-made vectors: what a single replay of a run's finding cannot show ------------------------


def determinism_scenario() -> Scenario:
    """Eight keys waiting for a consumer, then one pass delivers them all: its key order must not vary (KS-GEN-5)."""
    steps = [Step(op={"op": "publish", "offset": n, "key": f"k{n}"}) for n in range(8)]
    steps.append(Step(op={"op": "add_consumer", "consumer": "c1", "capacity": 8, "filters": []}))
    steps.append(Step(settle="oldest"))
    return Scenario({"profile": "owner", "selector": "ring"}, steps, covers=["KS-GEN-5"])


# --- writing -------------------------------------------------------------------------------------------


@dataclass
class Built:
    vector: Vector
    source: str
    """The mutant the vector comes from, or '' for a hand-made one."""
    description: str
    caught: list[tuple[str, list[str]]] = field(default_factory=list)
    """Every shipped mutant that fails it, with the kinds it shows."""


def matrix(judges: Judge, vector: Vector) -> list[tuple[str, list[str]]]:
    """Every shipped mutant that fails the vector, with the kinds it shows."""
    caught = []
    for mutant in (*MUTANTS, *DOUBLE_MUTANTS):
        result = judges.run(mutant.name, vector)
        if result.status in ("failed", "warning"):
            caught.append((mutant.name, result.kinds))
    return caught


def write_vector(judges: Judge, built: Built, folder: Path) -> list[str]:
    """Write one vector with its traces; returns notes on what was left out."""
    vector, notes = built.vector, []
    name = Path(vector.name).name
    caught = built.caught
    traces: list[dict[str, Any]] = []
    if vector.scenario.steps:
        sources = ["reference"] + ([built.source] if built.source else [])
        for role, source in zip(("pass", "fail"), sources, strict=False):
            result = judges.run(source, vector)
            file = folder / f"{name}.{role}.trace.jsonl"
            write_trace(result.trace, file)
            kinds = sorted({a.name for a in check_trace(file).anomalies})
            if role == "pass":
                assert not kinds, f"{vector.name}: the reference's trace shows {kinds}"
            elif not kinds or not set(kinds) <= allowed(BY_NAME[source]):
                file.unlink()
                notes.append(f"{vector.name}: no failing trace ({built.source}'s trace shows {kinds or 'nothing'})")
                continue
            implementation = "reference" if source == "reference" else f"mutant {source}"
            traces.append({"file": file.name, "implementation": implementation, "anomalies": kinds})
    annotation: dict[str, Any] = {
        "targets": list(vector.targets),
        "kinds": list(vector.kinds),
        "caught": [{"mutant": m, "anomalies": kinds} for m, kinds in caught],
        "traces": traces,
    }
    if vector.refused_config is not None:
        annotation["refused_config"] = vector.refused_config
    if vector.determinism:
        annotation["determinism"] = True
    primary = next((kinds for m, kinds in caught if m == built.source), [])
    scenario = replace(
        vector.scenario,
        covers=list(vector.targets),
        anomalies=primary,
        description=built.description,
        vector=annotation,
        found=provenance(vector.scenario.found, built.source),
    )
    lines = scenario.lines()
    lines[0]["id"] = vector.name.replace("/", "-").replace("_", "-").replace("+", "-and-")
    with open(folder / f"{name}{VECTOR_SUFFIX}", "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    return notes


def provenance(found: dict[str, Any], source: str) -> dict[str, Any]:
    """Where a vector came from, without import paths: the mutant by its plain name, the seed and round."""
    kept = {k: v for k, v in found.items() if k in ("seed", "round")}
    return {**kept, "mutant": source} if source else kept


def write_table(out: Path, missing: list[str]) -> None:
    """Rewrite the corpus table of the folder's README from the vector files."""
    vectors = find_vectors(out)
    rows = ["| requirement | vector | steps | kinds | failed on its kinds by | traces |", "|---|---|---|---|---|---|"]
    for vector in sorted(vectors, key=lambda v: (_id_order(v.targets[0]), v.name)):
        own = set(vector.kinds)
        on_target = [c.mutant for c in vector.caught if set(c.anomalies) & own]
        others = len(vector.caught) - len(on_target)
        failed = ", ".join(f"`{m}`" for m in on_target) or "-"
        if others:
            failed += f" (and {others} more on other kinds)"
        traces = ", ".join(
            f"[{t.path.name.split('.')[-3]}]({vector.name.split('/')[0]}/{t.path.name})"
            + (f" {', '.join(t.anomalies)}" if t.anomalies else "")
            for t in vector.traces
        )
        link = f"[`{vector.name}`]({vector.name}{VECTOR_SUFFIX})"
        cells = [", ".join(vector.targets), link, str(len(vector.scenario.steps)), ", ".join(vector.kinds)]
        rows.append("| " + " | ".join([*cells, failed, traces or "-"]) + " |")
    lines = [GENERATED_BEGIN, "", f"{len(vectors)} vectors.", "", *rows, ""]
    if missing:
        lines += ["Requirements a mutant must break that none of its saved scenarios gave a vector of:", ""]
        lines += [f"- `{item}`" for item in missing] + [""]
    lines.append(GENERATED_END)
    readme = out / "README.md"
    if not readme.is_file():  # (a new corpus folder, `--out`: the README around the table is the checked-in one)
        shutil.copyfile(VECTORS_DIR / "README.md", readme)
    text = readme.read_text(encoding="utf-8")
    if GENERATED_BEGIN in text:
        head, _, rest = text.partition(GENERATED_BEGIN)
        text = head + "\n".join(lines) + rest.partition(GENERATED_END)[2]
    else:
        text = text.replace("GENERATED_TABLE", "\n".join(lines))
    readme.write_text(text, encoding="utf-8")


def curated(judges: Judge, mutant: Mutant, target: str) -> Built | None:
    """The vector of `target` from this mutant's saved scenarios, or None."""
    found = curate(judges, mutant, target)
    if found is None:
        print(f"no vector: {mutant.name} for {target}", flush=True)
        return None
    kinds = tuple(sorted(set(found.kinds) & {kind.name for kind in rules_of(target)}))
    vector = replace(draft(found.scenario, (target,), kinds), name=situation(f"{target}/{mutant.name}"))
    print(f"{vector.name}: {len(found.scenario.steps)} steps, {', '.join(found.kinds)}", flush=True)
    return Built(vector, mutant.name, f"{target}, from mutant {mutant.name}: {mutant.bug}")


def fails_on(built: list[Built], mutant: Mutant, requirement: str) -> bool:
    """Whether some vector of `requirement` is failed by the mutant with one of the requirement's kinds."""
    own = {kind.name for kind in rules_of(requirement)}
    return any(
        requirement in item.vector.targets and mutant.name == name and set(kinds) & own
        for item in built
        for name, kinds in item.caught
    )


def build(out: Path, names: list[str]) -> None:
    """Curate the named mutants' vectors (and the hand-made ones) and rewrite the corpus folder (keeping its README).

    Single mutants first; then every shipped mutant (double ones too) that fails no vector of one of its must
    requirements gets one of its own, from its saved scenarios (a double mutant's are its two parts').
    """
    started = time.perf_counter()
    judges = Judge()
    built: list[Built] = []
    for mutant in (m for m in MUTANTS if m.name in names):
        wanted = (mutant.catches or mutant.warns) - HANDMADE | set(EXTRA_TARGETS.get(mutant.name, ()))
        for target in sorted(wanted):
            item = curated(judges, mutant, target)
            if item is not None:
                built.append(item)
    for field_name, change in INVALID_CONFIGS:
        config = {"profile": "owner", "selector": "ring", **change}
        vector = replace(
            draft(Scenario(config, []), ("KS-CFG-1",), ("config-accepted",)),
            name=situation(f"KS-CFG-1/{field_name}"),
            refused_config=field_name,
        )
        built.append(Built(vector, "", f"KS-CFG-1: the configuration must be refused naming {field_name!r}"))
    vector = replace(
        draft(determinism_scenario(), ("KS-GEN-5",), ("nondeterministic",)),
        name=situation("KS-GEN-5/one-pass-eight-keys"),
        determinism=True,
    )
    built.append(Built(vector, "", "KS-GEN-5: one pass over eight ready keys gives the same events on every start"))
    for item in built:
        item.caught = matrix(judges, item.vector)
    missing: list[str] = []
    for mutant in (m for m in (*MUTANTS, *DOUBLE_MUTANTS) if set(m.name.split("+")) <= set(names)):
        for target in sorted(mutant.catches - HANDMADE):
            if fails_on(built, mutant, target):
                continue
            item = curated(judges, mutant, target)
            if item is None:
                missing.append(f"{mutant.name} {target}")
                continue
            item.caught = matrix(judges, item.vector)
            built.append(item)
    for path in sorted(out.glob("KS-*")):
        shutil.rmtree(path)
    notes: list[str] = []
    for item in built:
        folder = out / Path(item.vector.name).parent
        folder.mkdir(parents=True, exist_ok=True)
        notes += write_vector(judges, item, folder)
    for note in notes + [f"no vector: {m}" for m in missing]:
        print(note)
    write_table(out, missing)
    print(f"{len(built)} vectors in {time.perf_counter() - started:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("search", "build", "all"))
    parser.add_argument("--jobs", type=int, default=2, help="worker processes for the search (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="the suite's seed (default 0)")
    parser.add_argument("--mutants", help="comma-separated mutant names to search (default: every single mutant)")
    parser.add_argument("--out", type=Path, default=VECTORS_DIR, help="the corpus folder (default spec/vectors)")
    parser.add_argument(
        "--reuse-corpus",
        action="store_true",
        help="build: a mutant with no saved search reuses the corpus vectors it fails (search only what changed)",
    )
    args = parser.parse_args(argv)
    global REUSE_CORPUS
    REUSE_CORPUS = args.reuse_corpus
    names = args.mutants.split(",") if args.mutants else [m.name for m in MUTANTS]
    if args.action in ("search", "all"):
        search(names, args.jobs, args.seed)
    if args.action in ("build", "all"):
        build(args.out, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
