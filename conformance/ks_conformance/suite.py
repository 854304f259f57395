"""A conformance run: the suite against one adapter, from `start` to a verdict per requirement.

`run_suite` probes the configuration refusals (KS-CFG-1), runs the Hypothesis state machine in rounds
(each round looks for violations of anomaly kinds not found yet, and shrinks the first it finds to a
minimal scenario; kinds found before are recorded and looked past, never allowed to end an example), keeps
every anomaly kind seen anywhere (a kind seen but never shrunk still fails its requirement, with the
example it was seen in as its scenario), replays the passing examples with the most events on the adapter and on a newly
started one to check determinism (KS-GEN-5), and turns it all into one status per requirement: passed,
failed, warning, vacuous, skipped or untested (spec/report-format.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ks_spec.errors import UserError
from ks_spec.requirements import load_index

from ks_conformance import report
from ks_conformance.anomalies import Anomaly, Explanation, requirement_levels
from ks_conformance.catalogue import BY_NAME, CATALOGUE, INDIRECT, checks_of
from ks_conformance.harness import Session
from ks_conformance.machine import FaultAbort, RunContext, Stratum, Violation, make_machine, strata, usable_values
from ks_conformance.protocol import AdapterFault, Capabilities, Connection, StartInfo
from ks_conformance.scenario import Scenario, events_signature, replay, write_scenario


@dataclass(frozen=True)
class RunSettings:
    """How hard a run looks: Hypothesis examples and steps per round, rounds, and the seed."""

    profile: str
    max_examples: int
    """Hypothesis examples per stratum (profile x poison policy) and round, at least."""
    steps: int
    rounds: int
    """At most this many rounds per stratum: each looks for anomaly kinds not found yet."""
    examples_total: int = 0
    """Examples per round over all strata: an implementation declaring few strata gets more per stratum."""
    seed: int = 0
    batch_chunk: int = 12
    """In batch mode: ops per replay while an example is drawn."""
    coverage_rounds: int = 2
    """Extra rounds over every stratum while a MUST requirement's checks were never exercised."""
    determinism_replays: int = 3
    shrinks: int = 100
    """Accepted shrinks per finding: a count, never seconds, so that one seed gives one result."""
    shrink_cap_seconds: int = 600
    """A wall-clock safety cap on one round's shrinking; the report says so when it ever fires."""

    def examples_per_stratum(self, strata: int) -> int:
        """`max_examples`, or more when few strata share the `examples_total` budget."""
        return max(self.max_examples, -(-self.examples_total // max(strata, 1)))

    def to_json(self) -> dict[str, Any]:
        """For the report header."""
        return {
            "profile": self.profile,
            "seed": self.seed,
            "max_examples": self.max_examples,
            "examples_total": self.examples_total,
            "stateful_step_count": self.steps,
            "rounds": self.rounds,
            "shrinks": self.shrinks,
            "shrink_cap_seconds": self.shrink_cap_seconds,
            "batch_chunk": self.batch_chunk,
            "coverage_rounds": self.coverage_rounds,
        }


PROFILES = {
    "ci": RunSettings("ci", max_examples=30, steps=40, rounds=3, examples_total=210, shrinks=100),
    "thorough": RunSettings("thorough", max_examples=300, steps=80, rounds=8, examples_total=2100, shrinks=500),
}
"""`ci` runs in about a minute against the reference; `thorough` is for nightly runs."""


def settings_for(profile: str, seed: int = 0, **overrides: Any) -> RunSettings:
    """The named settings profile with a seed (and any field overridden)."""
    base = PROFILES[profile]
    values = {**base.__dict__, "seed": seed, **overrides}
    return RunSettings(**values)


@dataclass
class Finding:
    """A violation found by a round, with the scenario that reproduces it."""

    anomalies: list[Anomaly]
    config: dict[str, Any]
    scenario: Scenario
    trace: list[dict[str, Any]]
    program: str = ""
    path: Path | None = None
    earlier: list[Anomaly] = field(default_factory=list)
    """Anomalies of kinds found before that the same example showed first: this one may be their consequence."""
    shrunk: bool = True
    """False for a kind seen in an example (or a shrink attempt) that no round shrank: its scenario is that example."""


@dataclass
class RunResult:
    """Everything a run found, ready to be rendered as a report."""

    adapter: str
    transport: str
    info: StartInfo
    capabilities: Capabilities
    settings: RunSettings
    findings: list[Finding] = field(default_factory=list)
    faults: list[tuple[AdapterFault, Path | None]] = field(default_factory=list)
    exercised: dict[str, int] = field(default_factory=dict)
    skipped_ops: dict[str, str] = field(default_factory=dict)
    refused_values: dict[str, list[Any]] = field(default_factory=dict)
    """Undeclared configuration values the adapter refused (their requirements may be skipped)."""
    examples: int = 0
    steps: int = 0
    started: str = ""
    duration: float = 0.0
    requirements: list[dict[str, Any]] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)
    """Wall-clock safety caps that fired: where the run's result may depend on the machine's speed."""

    @property
    def anomalies(self) -> list[Anomaly]:
        """Every anomaly of every finding."""
        return [a for f in self.findings for a in f.anomalies]

    @property
    def verdict(self) -> str:
        """conformant, not-conformant or unknown (spec/report-format.md section 2)."""
        if any(r["status"] == "failed" for r in self.requirements):
            return "not-conformant"
        if self.faults or any(r["status"] == "vacuous" and r["level"] == "MUST" for r in self.requirements):
            return "unknown"
        return "conformant"


def run_suite(
    connect: Callable[[], Connection],
    settings: RunSettings,
    scenarios: Path | None = None,
    check_stats: bool = True,
    on_progress: Callable[[str], None] | None = None,
    capabilities: Capabilities | None = None,
    *,
    on_finding: Callable[[Finding], None] | None = None,
    batch: bool | None = None,
) -> RunResult:
    """Run the suite against an adapter; StartFailed propagates (the adapter did not start).

    `batch` drives the adapter through `replay` (spec/adapter-protocol.md section 1): by default exactly
    when it declares `interactive: false`. Stats are not compared in batch mode (no replay stops between ops).

    `on_finding` is called with each finding of a round as soon as it is made; whatever it raises ends the run.
    """
    started, clock = report.now_iso(), time.perf_counter()
    say = on_progress or (lambda message: None)
    connection = connect()
    info = connection.start()
    declared = capabilities or info.capabilities
    batched = not declared.interactive if batch is None else batch
    if batched:
        if not declared.batch:
            raise UserError(f"{connection.adapter}: batch mode needs an adapter with the 'batch' capability", 64)
        declared = declared.narrowed(stats=False)
    result = RunResult(connection.adapter, connection.transport, info, declared, settings, started=started)
    context = RunContext(connect, declared, info.implementation, check_stats=check_stats, connection=connection)
    context.batch, context.chunk = batched, settings.batch_chunk
    try:
        _probe_configs(connection, declared, result, context)
        searched = strata(declared)
        per_stratum = settings.examples_per_stratum(len(searched))

        def search(index: int, stratum: Stratum, number: int, label: str) -> bool:
            """One round; True when it found something new (a finding or a fault)."""
            context.stratum = stratum
            found = _round(context, settings, per_stratum, index * 100 + number, label, say, result.limits)
            if found is None:
                return False
            if isinstance(found, Finding):
                found.path = write_scenario(found.scenario, scenarios) if scenarios is not None else None
                result.findings.append(found)
                context.suppressed.update(a.name for a in found.anomalies)
                say(f"{stratum.label}: found {', '.join(sorted({a.name for a in found.anomalies}))}")
                if on_finding is not None:
                    on_finding(found)
            else:
                path = write_scenario(found[1], scenarios) if scenarios is not None and found[1] else None
                result.faults.append((found[0], path))
                say(f"{stratum.label}: adapter fault ({found[0].kind}): {found[0].message}")
            return True

        for index, stratum in enumerate(searched):
            for number in range(settings.rounds):
                if not search(index, stratum, number, f"{stratum.label} round {number + 1}") or result.faults:
                    break
            if result.faults:
                break
        # A MUST requirement whose checks no example exercised would be vacuous: search on, with other seeds
        # (only while the run would otherwise be judged conformant: a violation already decides the verdict).
        for extra in range(settings.coverage_rounds):
            if result.faults or result.findings or not _vacuous(result, context):
                break
            say(f"not exercised yet: {', '.join(_vacuous(result, context))}")
            for index, stratum in enumerate(searched):
                search(index, stratum, 50 + extra, f"{stratum.label} coverage round {extra + 1}")
                if result.faults or not _vacuous(result, context):
                    break
        _add_unshrunk_observations(context, result, say)
        if not result.faults and declared.deterministic:
            try:
                _check_determinism(context, result)
            except AdapterFault as fault:  # a fault while replaying makes the run unknown, like any other
                result.faults.append((fault, None))
        if scenarios is not None:
            for finding in result.findings:
                if finding.path is None:  # configuration probes and determinism replays: saved as well
                    finding.path = write_scenario(finding.scenario, scenarios)
    finally:
        if context.connection is not None:
            context.connection.close()
    result.exercised = dict(context.exercised)
    result.skipped_ops = dict(context.skipped_ops)
    result.refused_values = {name: list(values) for name, values in context.refused_values.items()}
    result.examples, result.steps = context.examples, context.steps
    result.duration = time.perf_counter() - clock
    result.requirements = requirement_statuses(result)
    return result


def _add_unshrunk_observations(context: RunContext, result: RunResult, say: Callable[[str], None]) -> None:
    """A finding for every anomaly kind some example showed that no round shrank: a requirement violated
    anywhere in the run is never reported passed, and its first example is its replayable scenario."""
    found = {a.name for f in result.findings for a in f.anomalies}
    adapter = context.connection.adapter if context.connection else ""
    for name, seen in sorted(context.observed.items()):
        if name in found:
            continue
        shown = [*seen.earlier, seen.anomaly]
        scenario = Scenario(
            config=dict(seen.config),
            steps=list(seen.steps),
            covers=sorted({a.requirement for a in shown}),
            anomalies=sorted({a.name for a in shown}),
            description=f"{name} seen while the suite searched for other kinds (not shrunk)",
            found={"seed": result.settings.seed, "round": "observed", "adapter": adapter},
            tolerates=list(seen.tolerates),
        )
        finding = Finding([seen.anomaly], dict(seen.config), scenario, list(seen.trace), earlier=list(seen.earlier))
        finding.shrunk = False
        result.findings.append(finding)
        say(f"seen but not shrunk: {name}")


def _vacuous(result: RunResult, context: RunContext) -> list[str]:
    """The MUST requirements that would be reported vacuous if the run ended now."""
    result.exercised = dict(context.exercised)
    result.skipped_ops = dict(context.skipped_ops)
    result.refused_values = {name: list(values) for name, values in context.refused_values.items()}
    statuses = requirement_statuses(result)
    return [line["id"] for line in statuses if line["status"] == "vacuous" and line["level"] == "MUST"]


def _round(
    context: RunContext,
    settings: RunSettings,
    examples: int,
    number: int,
    label: str,
    say: Callable[[str], None],
    limits: list[str],
) -> Finding | tuple[AdapterFault, Scenario | None] | None:
    """One Hypothesis run; the shrunk finding, an adapter fault, or None when nothing new was found.

    Shrinking is bounded by counts (`settings.shrinks` accepted shrinks, and Hypothesis's own limit on attempts
    in a row that shrink nothing), so a seed gives one result; the wall-clock cap, a safety net only, is added
    to `limits` when it fires.
    """
    from hypothesis import HealthCheck, Phase, seed
    from hypothesis import settings as hypothesis_settings
    from hypothesis.errors import Flaky
    from hypothesis.reporting import with_reporter
    from hypothesis.stateful import run_state_machine_as_test

    machine = make_machine(context)
    seeded = seed(settings.seed * 1000 + number)(machine)
    options = hypothesis_settings(
        max_examples=examples,
        stateful_step_count=settings.steps,
        deadline=None,
        database=None,
        derandomize=False,
        report_multiple_bugs=False,
        print_blob=False,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )
    printed: list[str] = []

    def keep(value: object) -> None:
        printed.append(str(value))

    say(f"{label}: {examples} examples of up to {settings.steps} steps")
    try:
        with with_reporter(keep), _shrink_limits(settings.shrinks, settings.shrink_cap_seconds):
            run_state_machine_as_test(seeded, settings=options)
    except Violation as violation:
        session = violation.session
        anomalies = violation.anomalies
        earlier = [a for a in session.anomalies if not any(a is new for new in anomalies)]
        shown = [*earlier, *anomalies]
        scenario = Scenario(
            config=dict(session.config),
            steps=list(session.steps),
            covers=sorted({a.requirement for a in shown}),
            anomalies=sorted({a.name for a in shown}),
            description="; ".join(sorted({a.name for a in anomalies})) + " found by the conformance suite",
            found={
                "seed": settings.seed,
                "round": label,
                "adapter": context.connection.adapter if context.connection else "",
            },
            tolerates=sorted(session.tolerated),
        )
        finding = Finding(anomalies, dict(session.config), scenario, list(session.trace), "\n".join(printed))
        finding.earlier = earlier
        return finding
    except FaultAbort as abort:  # the run ends at the first fault: nothing to shrink
        return abort.fault, None
    except Flaky as flaky:
        anomaly = Anomaly(
            "nondeterministic",
            -1,
            (),
            Explanation(
                ("an example failed, then passed when Hypothesis ran the same operations again",),
                f"the same operations gave different results ({type(flaky).__name__}), but an implementation "
                "emits the same events for the same operations (KS-GEN-5)",
            ),
        )
        return Finding([anomaly], {}, Scenario({}, [], covers=["KS-GEN-5"], anomalies=["nondeterministic"]), [])
    finally:
        if any(_CAP_FIRED in line for line in printed):
            limits.append(
                f"{label}: shrinking stopped at the wall-clock cap of {settings.shrink_cap_seconds} s "
                "(its scenario may not be minimal, and another run of the same seed may shrink further)"
            )
    return None


_CAP_FIRED = "stopped because it is making very slow progress"
"""What Hypothesis reports when its shrinking deadline (our wall-clock cap) ends a shrink."""


@contextmanager
def _shrink_limits(shrinks: int, seconds: int) -> Iterator[None]:
    """Bound shrinking by a count of accepted shrinks (deterministic), with a wall-clock safety cap above it.

    Hypothesis has no public setting for either (its own limits are 500 shrinks and five minutes); they are
    module constants of its engine, which the pinned version (pyproject.toml) keeps under these names.
    Restored afterwards.
    """
    from hypothesis.internal.conjecture import engine

    previous = engine.MAX_SHRINKS, engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKS, engine.MAX_SHRINKING_SECONDS = shrinks, seconds
    try:
        yield
    finally:
        engine.MAX_SHRINKS, engine.MAX_SHRINKING_SECONDS = previous


INVALID_CONFIGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("window", {"window": 0}),
    ("frobnicate", {"frobnicate": 1}),
    ("backoff_base", {"backoff_base": 5, "backoff_max": 1}),
    ("bucket_budget", {"bucket_budget": 2}),
    ("profile", {"profile": "eventual"}),
    ("max_redeliveries", {"max_redeliveries": -1}),
)
"""Configurations the spec refuses (KS-CFG-1), and the field the refusal must name."""


def _probe_configs(connection: Connection, capabilities: Capabilities, result: RunResult, context: RunContext) -> None:
    """Every nonsensical configuration must be refused with invalid_config naming its field (KS-CFG-1)."""
    base = {
        "profile": capabilities.profiles[0],
        "selector": "ring" if "ring" in capabilities.selectors else capabilities.selectors[0],
    }
    if base["selector"] == "buckets":
        return
    for field_name, change in INVALID_CONFIGS:
        config = {**base, **change}
        outcome = connection.reset(config)
        context.exercised["config-accepted"] = context.exercised.get("config-accepted", 0) + 1
        why = ""
        if outcome.ok:
            why = "the adapter accepted it"
        elif outcome.code != "invalid_config":
            why = f"the adapter refused it with {outcome.code!r}, not 'invalid_config'"
        elif outcome.error_field != field_name:
            why = f"the refusal names field {outcome.error_field!r}, not {field_name!r}"
        if why:
            anomaly = Anomaly(
                "config-accepted",
                -1,
                (),
                Explanation(
                    (f"config = {config}",),
                    f"{why}, but it must be refused with invalid_config naming the field {field_name!r} (KS-CFG-1)",
                ),
                {"config": config},
            )
            scenario = Scenario(config, [], covers=["KS-CFG-1"], anomalies=["config-accepted"])
            result.findings.append(Finding([anomaly], config, scenario, []))


def _check_determinism(context: RunContext, result: RunResult) -> None:
    """Replay the richest passing examples on the adapter, then on a newly started one; different events
    are a KS-GEN-5 warning.

    The second adapter is a new object (in process) or a new process (stdio): an order that depends on
    something chosen at start, such as a hash seed, shows only across starts.
    """
    examples = context.kept[: result.settings.determinism_replays]
    if not examples:
        return
    runs: list[list[list[str]]] = []
    for fresh in (False, True):
        if fresh and context.connection is not None:
            context.connection.close()
            context.connection = None
        connection = context.live_connection()
        traces = []
        for config, steps in examples:
            replayed = replay(
                Scenario(config, steps),
                connection,
                context.capabilities,
                context.implementation,
                check_stats=False,
                batch=context.batch,
            )
            if replayed.session is None:
                return
            traces.append(events_signature(replayed.session.trace))
        runs.append(traces)
    for (config, steps), before, after in zip(examples, runs[0], runs[1], strict=True):
        context.exercised["nondeterministic"] = context.exercised.get("nondeterministic", 0) + 1
        if before != after:
            first = next(
                (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
                min(len(before), len(after)),
            )
            anomaly = Anomaly(
                "nondeterministic",
                first,
                (),
                Explanation(
                    (f"the same {len(steps)} operations run from a fresh reset, then on a newly started adapter",),
                    f"the runs differ from event {first} on, but the same operations give the same events (KS-GEN-5)",
                ),
            )
            result.findings.append(
                Finding([anomaly], config, Scenario(config, steps, ["KS-GEN-5"], ["nondeterministic"]), [])
            )
            return


# --- requirement statuses --------------------------------------------------------------------------


def _needs(
    name: str,
    capabilities: Capabilities,
    skipped: Mapping[str, str],
    refused: Mapping[str, Sequence[Any]] | None = None,
) -> str | None:
    """Why an anomaly's check cannot be exercised against these capabilities, or None if it can."""
    ops = set(capabilities.ops) - set(skipped)
    selectors = set(capabilities.selectors)
    policies = set(capabilities.poison_policies)
    failures = "nack" in ops or capabilities.ack_timeout
    refusals = refused or {}

    def need(condition: bool, what: str) -> str | None:
        return None if condition else what

    def positive(field_name: str) -> bool:
        """True if the kit may draw a value above 0 for a timing field (declared, and not refused)."""
        return any(v > 0 for v in usable_values(capabilities, refusals, field_name))

    def supported(field_name: str) -> str:
        values = usable_values(capabilities, refusals, field_name)
        gone = sorted(set(refusals.get(field_name, ())))
        said = f"; refused {gone}" if gone else ""
        return f"{field_name} > 0 (the adapter supports {values or 'none of the values drawn'}{said})"

    fixed_target = bool(selectors - {"pulsar-sticky", "buckets"})

    requirements: dict[str, str | None] = {
        "stale-nack-accepted": need("nack" in ops, "op nack"),
        "holder-nack-ignored": need("nack" in ops, "op nack"),
        "premature-timeout": need(capabilities.ack_timeout and "tick" in ops, "capability ack_timeout")
        or need(positive("ack_timeout"), supported("ack_timeout")),
        "missed-timeout": need(capabilities.ack_timeout and "tick" in ops, "capability ack_timeout")
        or need(positive("ack_timeout"), supported("ack_timeout")),
        "early-retry": need(failures and "tick" in ops, "op nack or capability ack_timeout")
        or need(positive("backoff_base"), supported("backoff_base")),
        "retry-overtaken": need(failures or "remove_consumer" in ops, "op nack, ack_timeout or remove_consumer"),
        "retry-overrun": need(failures and bool(policies), "failures and a poison policy"),
        "poison-ignored": need(failures and bool(policies) and "tick" in ops, "failures and a poison policy"),
        "blocked-key-leak": need(failures and "block" in policies, "poison policy block"),
        "unjustified-block": need(failures and "block" in policies, "poison policy block"),
        "stale-budget": need(
            failures and "block" in policies and "release" in ops, "poison policy block and op release"
        ),
        "return-counted": need(failures and bool(policies) and "tick" in ops, "failures and a poison policy")
        or need("remove_consumer" in ops or "disconnect" in ops, "op remove_consumer or disconnect"),
        "skip-ignored": need(failures and "block" in policies and "skip" in ops, "poison policy block and op skip"),
        "dead-letter-mismatch": need(failures and "dead-letter" in policies, "poison policy dead-letter"),
        "unjustified-resolution": need(
            (failures and bool(policies & {"drop", "dead-letter"})) or "skip" in ops, "a poison policy that resolves"
        ),
        "premature-eviction": need("disconnect" in ops and "tick" in ops, "op disconnect")
        or need(positive("evict_after"), supported("evict_after")),
        "missed-eviction": need("disconnect" in ops and "tick" in ops, "op disconnect")
        or need(positive("evict_after"), supported("evict_after")),
        "inactive-delivery": need("disconnect" in ops, "op disconnect"),
        "filter-violation": need(capabilities.filters, "capability filters"),
        "unjustified-filter": need(capabilities.filters, "capability filters"),
        "unfiltered-wait": need(capabilities.filters and fixed_target, "capability filters"),
        "unjustified-outcome": None,
        "filtered-without-members": need(capabilities.filters and "remove_consumer" in ops, "capability filters"),
        "resurrected": need("restart" in ops, "op restart"),
        "persist-early": need("tick" in ops, "op tick")
        or need(capabilities.cursor, "a persisted cursor (capability cursor)")
        or need(positive("persist_interval"), supported("persist_interval")),
        "persist-late": need(capabilities.cursor, "a persisted cursor (capability cursor)"),
        "restart-skip": need("restart" in ops, "op restart")
        or need(capabilities.cursor, "a persisted cursor (capability cursor): without one nothing is volatile"),
        "cursor-skip": need(capabilities.cursor, "a persisted cursor (capability cursor)"),
        "cursor-regress": need(capabilities.cursor, "a persisted cursor (capability cursor)"),
        "cursor-stall": need(capabilities.cursor, "a persisted cursor (capability cursor)"),
        "overtaken-hold": need(
            capabilities.held_events,
            "held events (capability held_events); a held message overtaken shows as key-reorder (KS-ORD-1)",
        ),
        "drain-stuck": need(
            capabilities.held_events,
            "held events (capability held_events); a drain that never clears shows as stuck-key (KS-LIV-1)",
        )
        or need(bool(selectors - {"any"}), "a selector with key affinity (with any, a held key never moves: no drain)"),
        "key-moved": need(bool(selectors - {"any"}), "a selector with key affinity (not any)"),
        "phase-order": need("tick" in ops, "op tick"),
        "lost": need("remove_consumer" in ops or "disconnect" in ops, "op remove_consumer or disconnect"),
        "split-owner": need(len(capabilities.profiles) > 0, ""),
        "unstable-assignment": need(bool(selectors - {"buckets", "any"}), "a selector other than buckets and any"),
        "idle-while-ready": need(fixed_target, "a selector with a fixed target, or any"),
        "misrouted-bucket": need("buckets" in selectors, "selector buckets"),
        "bucket-misassigned": need("buckets" in selectors, "selector buckets"),
        "bucket-split-owner": need("buckets" in selectors, "selector buckets"),
        "checkpoint-skip": need("buckets" in selectors, "selector buckets"),
        "successor-first": need("buckets" in selectors and bool({"rollover", "split"} & ops), "op rollover or split"),
        "capacity-overrun": need(capabilities.capacity, "capability capacity (capacity never binds)"),
        "window-overrun": need(capabilities.window, "capability window (no read-ahead window)"),
        "stats-mismatch": need(capabilities.stats, "capability stats"),
        "blocked-key-hidden": need(capabilities.stats and "block" in policies, "capability stats and policy block"),
        "drop-uncounted": need(capabilities.stats, "capability stats"),
        "nondeterministic": need(capabilities.deterministic, "the adapter does not declare itself deterministic"),
        "config-accepted": need("ring" in selectors or bool(selectors - {"buckets"}), "a selector other than buckets"),
    }
    return requirements.get(name)


def requirement_statuses(result: RunResult) -> list[dict[str, Any]]:
    """One `requirement` line per requirement of the spec, in spec order."""
    capabilities = result.capabilities
    violations: dict[str, list[Anomaly]] = {}
    for anomaly in result.anomalies:
        violations.setdefault(anomaly.requirement, []).append(anomaly)
    lines: list[dict[str, Any]] = []
    for entry in load_index():
        identifier, level, title = str(entry["id"]), str(entry["level"]), str(entry["title"])
        profiles = [str(p) for p in entry["profiles"]]  # type: ignore[attr-defined]
        checks = [k.name for k in checks_of(identifier)]
        line: dict[str, Any] = {
            "type": "requirement",
            "id": identifier,
            "title": title,
            "level": level,
            "checks": checks,
            "exercised": {name: result.exercised.get(name, 0) for name in checks},
        }
        tested_profiles = [p for p in capabilities.profiles if p in profiles]
        found = violations.get(identifier, [])
        line["violations"] = len(found)
        if not tested_profiles:
            line.update(
                status="skipped",
                reason=f"applies to {', '.join(profiles)}; the implementation declares "
                f"{', '.join(capabilities.profiles)}",
            )
        elif not checks:
            line.update(status="untested", reason=INDIRECT.get(identifier, "no check of its own"))
        elif found:
            line["status"] = "failed" if level == "MUST" else "warning"
        else:
            missing = [_needs(name, capabilities, result.skipped_ops, result.refused_values) for name in checks]
            usable = [name for name, why in zip(checks, missing, strict=True) if not why]
            if not usable:
                reasons = sorted({why for why in missing if why})
                line.update(status="skipped", reason="needs " + " or ".join(reasons))
            elif sum(result.exercised.get(name, 0) for name in usable) == 0:
                line.update(status="vacuous", reason="its checks were never exercised in this run")
            else:
                line["status"] = "passed"
        lines.append(line)
    return lines


def report_lines(result: RunResult) -> list[dict[str, Any]]:
    """The run as a report (spec/report-format.md)."""
    lines: list[dict[str, Any]] = [
        report.header(
            "conformance",
            protocol_version=result.info.version,
            adapter=result.adapter,
            transport=result.transport,
            implementation=result.info.implementation,
            capabilities=result.capabilities.to_json(),
            settings=result.settings.to_json(),
            started=result.started,
            **({"refused_config_values": result.refused_values} if result.refused_values else {}),
        )
    ]
    lines += result.requirements
    for finding in result.findings:
        events_by_seq = {event["seq"]: event for event in finding.trace}
        for anomaly in finding.anomalies:
            line = {"type": "violation", **anomaly.to_json(), "config": finding.config}
            line["events"] = [events_by_seq[s] for s in anomaly.witness if s in events_by_seq]
            if not finding.shrunk:
                line["shrunk"] = False
            if finding.earlier:
                line["preceded_by"] = [{"anomaly": a.name, "seq": a.seq} for a in finding.earlier]
            if finding.path is not None:
                line["scenario"] = str(finding.path)
            lines.append(line)
    for fault, path in result.faults:
        error = {"type": "error", **fault.to_json()}
        if path is not None:
            error["scenario"] = str(path)
        lines.append(error)
    counts: dict[str, int] = {}
    for requirement in result.requirements:
        counts[requirement["status"]] = counts.get(requirement["status"], 0) + 1
    levels = requirement_levels()
    lines.append(
        {
            "type": "footer",
            "verdict": result.verdict,
            "counts": counts,
            "observed_anomalies": sorted({a.name for a in result.anomalies}),
            "violated": sorted({a.requirement for a in result.anomalies if levels.get(a.requirement) == "MUST"}),
            "warnings": sorted({a.requirement for a in result.anomalies if levels.get(a.requirement) != "MUST"}),
            "examples": result.examples,
            "steps": result.steps,
            "duration_s": round(result.duration, 3),
            "finished": report.now_iso(),
            **({"limits": result.limits} if result.limits else {}),
        }
    )
    return lines


def describe_catalogue() -> list[tuple[str, str, str]]:
    """(anomaly, requirement, stage) for every check, for `--help`-style listings."""
    return [(k.name, k.requirement, k.stage.value) for k in CATALOGUE if k.name in BY_NAME]


def judge_session(session: Session) -> list[Anomaly]:
    """All anomalies a finished session found."""
    return list(session.anomalies)
