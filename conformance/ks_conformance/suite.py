"""A conformance run: the suite against one adapter, from `start` to a verdict per requirement.

`run_suite` probes the configuration refusals (KS-CFG-1), runs the Hypothesis state machine in rounds
(each round looks for violations of anomaly kinds not found yet and ends at the first example that shows
one; kinds found before are recorded and looked past, never allowed to end an example), shrinks each new
kind of that example to its own minimal scenario (shrink.py: counted replays, no Hypothesis shrinking),
then shrinks every other kind seen anywhere the same way (a kind seen in any example or replay fails its
requirement), replays the passing examples with the most events on the adapter and on a newly started one
to check determinism (KS-GEN-5), and turns it all into one status per requirement: passed, failed,
warning, vacuous, skipped or untested (spec/report-format.md).

Long because the rounds, the shrinking of each kind and the coverage rounds share one run context; the run's data
(results.py) and the requirement statuses (statuses.py) live apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS
from ks_spec.errors import UserError

from ks_conformance import report
from ks_conformance.anomalies import Anomaly, Explanation, requirement_profiles
from ks_conformance.batch import AnySession
from ks_conformance.determinism import seed_decides
from ks_conformance.harness import SLOTS, Session, Step
from ks_conformance.machine import FaultAbort, Violation, machine_for
from ks_conformance.protocol import AdapterFault, Capabilities, Connection
from ks_conformance.results import Finding, RunResult, RunSettings
from ks_conformance.rules import BY_NAME, RULES, rules_of
from ks_conformance.scenario import Scenario, replay, write_scenario
from ks_conformance.search import Observation, RunContext, Stratum, strata
from ks_conformance.shrink import Shape, Witness, first_of, reproduce, shape_of, shrink
from ks_conformance.statuses import check_needs, requirement_statuses
from ks_conformance.tracefile import events_signature


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

    `on_finding` is called with each finding as soon as it is shrunk; whatever it raises ends the run.
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

        def add(finding: Finding) -> None:
            """Save a finding's scenario, record it, and tell the caller."""
            if finding.path is None and scenarios is not None:
                finding.path = write_scenario(finding.scenario, scenarios)
            result.findings.append(finding)
            if on_finding is not None:
                on_finding(finding)

        def search(index: int, stratum: Stratum, number: int, label: str, examples: int = per_stratum) -> bool:
            """One round: `examples` examples, however many of them end at a new kind; True when it found
            something new (a finding or a fault). An example that shows a new kind ends (its kinds are shrunk),
            and the round goes on with the examples it has left, looking past the kinds found so far."""
            context.stratum = stratum
            left, part, new = examples, 0, False
            while left > 0 and not result.faults:
                before = context.examples
                found = _round(context, settings, left, index * 100 + number, part, label, say)
                left -= max(context.examples - before, 1)
                part += 1
                for flaky in context.flaky:  # a deterministic adapter's flaky rerun: KS-GEN-5, reported once
                    if not any("nondeterministic" in f.scenario.anomalies for f in result.findings):
                        add(flaky)
                context.flaky.clear()
                if found is None:
                    break
                new = True
                if isinstance(found, AdapterFault):
                    result.faults.append((found, None))
                    say(f"{stratum.label}: adapter fault ({found.kind}): {found.message}")
                elif isinstance(found, Finding):  # the same operations gave different results (KS-GEN-5), once
                    if not any("nondeterministic" in f.scenario.anomalies for f in result.findings):
                        add(found)
                else:
                    kinds = sorted({a.name for a in found.anomalies} - context.suppressed)  # the step's new kinds
                    context.suppressed.update(kinds)
                    say(f"{stratum.label}: found {', '.join(kinds)}")
                    base = _example(found.session)
                    for kind in kinds:
                        seen = _Seen.of_violation(found, kind)
                        add(_witness(context, result, base, kind, seen, label, say))
                        if result.faults:
                            break
            return new

        for index, stratum in enumerate(searched):
            for number in range(settings.rounds):
                if not search(index, stratum, number, f"{stratum.label} round {number + 1}") or result.faults:
                    break
            if result.faults:
                break
        # A MUST requirement whose checks no example exercised would be vacuous: search on, with other seeds
        # (only while the run would otherwise be judged conformant: a violation already decides the verdict).
        # Only the strata that can exercise one of them are searched again (a poison-policy check needs its policy).
        for extra in range(settings.coverage_rounds):
            vacuous = _vacuous(result, context)
            if result.faults or result.findings or not vacuous:
                break
            say(f"not exercised yet: {', '.join(vacuous)}")
            context.capabilities = plain = _plain_for(vacuous, declared, result)
            aimed = [(i, f) for i, s in enumerate(searched) if (f := _focused(s, vacuous, plain, result)) is not None]
            # the round's whole budget goes to the strata that can still exercise a missing check
            examples = settings.examples_per_stratum(len(aimed))
            for index, focused in aimed:
                search(index, focused, 50 + extra, f"{focused.label} coverage round {extra + 1}", examples)
                if result.faults or not _vacuous(result, context):
                    break
            context.capabilities = declared
        if not result.faults:
            _shrink_observations(context, result, add, say)
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
    for finding in result.findings:
        tally = context.tallies.get(finding.shape) if finding.shape is not None else None
        if tally is not None:
            finding.examples, finding.triggers = tally.examples, dict(tally.triggers)
    result.exercised = dict(context.exercised)
    result.skipped_ops = dict(context.skipped_ops)
    result.refused_values = {name: list(values) for name, values in context.refused_values.items()}
    result.departures = dict(context.departures)
    result.examples, result.steps = context.examples, context.steps
    result.duration = time.perf_counter() - clock
    result.requirements = requirement_statuses(result)
    return result


@dataclass(frozen=True)
class _Seen:
    """An anomaly kind as an example first showed it: what a finding reports if replays cannot shrink it."""

    anomalies: list[Anomaly]
    config: dict[str, Any]
    steps: list[Step]
    trace: list[dict[str, Any]]
    earlier: list[Anomaly]
    tolerates: list[str]
    shape: Shape

    @classmethod
    def of_violation(cls, violation: Violation, kind: str) -> _Seen:
        """`kind` as the example that raised `violation` showed it (the shape of its first anomaly of the kind)."""
        session = violation.session
        shape = shape_of(next(a for a in violation.anomalies if a.name == kind), session)
        anomalies = [a for a in violation.anomalies if shape_of(a, session) == shape]
        earlier = [a for a in session.anomalies if a.name != kind and not any(a is new for new in anomalies)]
        trace, steps = list(session.trace), list(session.steps)
        return cls(anomalies, dict(session.config), steps, trace, earlier, sorted(session.tolerated), shape)

    @classmethod
    def of_observation(cls, seen: Observation) -> _Seen:
        """A shape recorded while the run searched for others."""
        config, steps, trace = dict(seen.config), list(seen.steps), list(seen.trace)
        shape = seen.shape or Shape(seen.anomaly.name, "none")
        return cls([seen.anomaly], config, steps, trace, list(seen.earlier), list(seen.tolerates), shape)


def _example(session: AnySession) -> Scenario:
    """The steps an example ran, as a scenario to shrink."""
    return Scenario(dict(session.config), list(session.steps), tolerates=sorted(session.tolerated))


def _witness(
    context: RunContext,
    result: RunResult,
    base: Scenario,
    kind: str,
    seen: _Seen,
    label: str,
    say: Callable[[str], None],
) -> Finding:
    """Shrink `base` to a witness of `kind`, of the shape `seen` showed, by counted replays (shrink.py) and make
    it a finding.

    Every replay's anomalies are recorded (a shape first shown by a replay is shrunk later in its turn). If
    the example's replay no longer shows the shape, the finding keeps the example as it ran (`shrunk` False).
    An adapter that declares itself nondeterministic has each candidate replayed up to `shrink_tries` times
    (kept if one shows the shape), and the witness replayed `reproductions` times for its reproduction rate.
    """
    settings = result.settings
    replayed, record = partial(_replayed, context), partial(_record, context)
    tries = 1 if context.capabilities.deterministic else settings.shrink_tries
    witness = shrink(
        base,
        kind,
        replayed,
        settings.shrinks * tries,
        cap_seconds=settings.shrink_cap_seconds,
        on_replay=record,
        shape=seen.shape,
        tries=tries,
    )
    _report_shrink(witness, result, label, say)
    reproduced: tuple[int, int] | None = None
    if not context.capabilities.deterministic and witness.fault is None:
        try:
            hits, made, again = reproduce(
                witness.scenario, seen.shape, replayed, settings.reproductions, on_replay=record
            )
        except AdapterFault as fault:
            result.faults.append((fault, None))
        else:
            reproduced = (hits, made)
            if witness.session is None and again is not None:  # the unshrunk example, shown by a later replay
                witness.session = again
            say(f"{label}: {kind} ({seen.shape.cause}) reproduced {hits} of {made} replays")
    adapter = context.connection.adapter if context.connection else ""
    origin = {"seed": settings.seed, "round": label, "adapter": adapter}
    session = witness.session
    if session is None:
        shown = [*seen.earlier, *seen.anomalies]
        scenario = Scenario(
            config=dict(seen.config),
            steps=list(seen.steps),
            covers=sorted({a.requirement for a in shown}),
            anomalies=sorted({a.name for a in shown}),
            description=f"{kind} found by the conformance suite (not shrunk: its replay did not show it again)",
            found=origin,
            tolerates=list(seen.tolerates),
        )
        finding = Finding(list(seen.anomalies), dict(seen.config), scenario, list(seen.trace))
        finding.earlier, finding.shrunk = list(seen.earlier), False
        finding.shape, finding.reproduced = seen.shape, reproduced
        return finding
    position = first_of(session, seen.shape)
    assert position is not None, "a witness session shows its shape"
    found = session.anomalies[position]
    scenario = witness.scenario
    scenario.covers = sorted({a.requirement for a in session.anomalies})
    scenario.anomalies = sorted({a.name for a in session.anomalies})
    scenario.description = f"{kind} found by the conformance suite"
    scenario.found = origin
    finding = Finding([found], dict(scenario.config), scenario, list(session.trace))
    finding.earlier = [a for a in session.anomalies[:position] if a.name != kind]
    finding.shape, finding.reproduced = seen.shape, reproduced
    return finding


def _replayed(context: RunContext, scenario: Scenario) -> AnySession | None:
    """Replay a scenario on the run's adapter as `keyshared conformance replay` would; None if its config is refused."""
    connection, capabilities = context.live_connection(), context.capabilities
    shown = replay(scenario, connection, capabilities, context.implementation, context.check_stats, batch=context.batch)
    return shown.session


def _record(context: RunContext, session: AnySession) -> None:
    """A replay is an example of the run: what it shows and exercises counts like any other example's."""
    context.observe(session, list(session.anomalies))
    context.collect(session)


def _report_shrink(witness: Witness, result: RunResult, label: str, say: Callable[[str], None]) -> None:
    """Say how shrinking went; a fault joins the run's faults, and a cap that fired its `limits`."""
    say(f"{label}: {witness.kind} shrunk in {witness.attempts} replays ({witness.accepted} kept)")
    if witness.fault is not None:
        result.faults.append((witness.fault, None))
        say(f"{label}: adapter fault while shrinking ({witness.fault.kind}): {witness.fault.message}")
    if witness.stopped == "cap":
        result.limits.append(
            f"{label}: shrinking {witness.kind} stopped at the wall-clock cap of "
            f"{result.settings.shrink_cap_seconds} s after {witness.attempts} replays (its scenario may not be "
            "minimal, and another run of the same seed may shrink further)"
        )


def _shrink_observations(
    context: RunContext, result: RunResult, add: Callable[[Finding], None], say: Callable[[str], None]
) -> None:
    """A shrunk finding for every shape some example (or replay) showed that no round ended on: a requirement
    violated anywhere in the run is never reported passed, and each shape of a kind (a kind with another cause:
    a nack, a leave, ...) has its own witness, up to `shapes_per_kind` per kind; further shapes are counted only.
    The kinds without a witness go first, then the shapes seen in the most examples."""
    done = {f.shape for f in result.findings if f.shape is not None}
    done |= {Shape(a.name, "none") for f in result.findings if f.shape is None for a in f.anomalies}
    limit = max(result.settings.shapes_per_kind, 1)
    while not result.faults:
        kinds = [shape.kind for shape in done]
        pending = [
            shape
            for shape in context.observed
            if shape not in done and (shape.kind not in kinds or kinds.count(shape.kind) < limit)
        ]
        if not pending:
            return
        shape = min(
            pending,
            key=lambda s: (
                s.kind in kinds,
                -context.tallies[s].examples if s in context.tallies else 0,
                s.kind,
                s.cause,
            ),
        )
        seen = context.observed[shape]
        base = Scenario(dict(seen.config), list(seen.steps), tolerates=list(seen.tolerates))
        what = shape.kind if shape.kind not in kinds else f"{shape.kind} after a {shape.cause} (another shape)"
        say(f"seen while searching for other kinds: {what}")
        add(_witness(context, result, base, shape.kind, _Seen.of_observation(seen), "observed", say))
        done.add(shape)


FORM_OPTIONS = (
    "flow_control", "read_bound", "tick_order", "drain_granularity", "park_after", "read_trigger", "timer_slack",
    "ack_by_id",
)  # fmt: skip
"""Options whose other forms reshape every example (spec section 20): coverage rounds keep their defaults unless a
missing check needs them."""


def _plain_for(requirements: Sequence[str], declared: Capabilities, result: RunResult) -> Capabilities:
    """The capabilities a coverage round draws from: the declared ones, minus every form option that none of the
    checks of `requirements` needs (each draws its default), so that the round spends its examples on them."""

    def exercisable(capabilities: Capabilities) -> set[str]:
        return {
            requirement
            for requirement in requirements
            for kind in rules_of(requirement)
            if check_needs(kind.name, capabilities, result.skipped_ops, result.refused_values) is None
        }

    plain, wanted = declared, exercisable(declared)
    for option in FORM_OPTIONS:
        if CONFIG_DEFAULTS[option] not in plain.config_values.get(option, ()):
            continue  # undeclared (the default already), or the adapter does not support the default
        trial = plain.narrowed(config_values={k: v for k, v in plain.config_values.items() if k != option})
        if exercisable(trial) >= wanted:
            plain = trial
    return plain


def _focused(
    stratum: Stratum, requirements: Sequence[str], declared: Capabilities, result: RunResult
) -> Stratum | None:
    """`stratum` narrowed to the selectors with which a check of one of `requirements` can be exercised (its
    profile and policy permitting), or None when none can: a coverage round spends its examples only there."""
    profiles = requirement_profiles()
    policies = (stratum.poison_policy,) if stratum.poison_policy else declared.poison_policies

    def useful(selector: str) -> bool:
        narrowed = declared.narrowed(profiles=(stratum.profile,), selectors=(selector,), poison_policies=policies)
        return any(
            stratum.profile in profiles.get(requirement, ())
            and check_needs(kind.name, narrowed, result.skipped_ops, result.refused_values) is None
            for requirement in requirements
            for kind in rules_of(requirement)
        )

    selectors = tuple(selector for selector in stratum.selectors if useful(selector))
    return Stratum(stratum.profile, stratum.poison_policy, selectors) if selectors else None


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
    part: int,
    label: str,
    say: Callable[[str], None],
) -> Violation | Finding | AdapterFault | None:
    """One Hypothesis run: the first example that showed new anomaly kinds, a fault, or None.

    Hypothesis only searches (no shrink phase): it stops at the first failing example and runs it once
    more to report it; the kit shrinks each kind it shows itself (`_witness`), by counted replays. When that
    second run passed (Hypothesis' `Flaky`), the first run's violation is returned all the same (the context
    kept it): a violation seen is never lost. A Finding (KS-GEN-5, for an adapter that declares itself
    deterministic) is returned only when Hypothesis was flaky with no violation to return; the caller goes on
    with the round's examples either way, and the flaky rerun of a deterministic adapter is a KS-GEN-5 finding
    of its own (`_flaky_finding`).
    """
    from hypothesis import HealthCheck, Phase, seed
    from hypothesis import settings as hypothesis_settings
    from hypothesis.errors import Flaky
    from hypothesis.reporting import with_reporter
    from hypothesis.stateful import run_state_machine_as_test

    machine = seed(settings.seed * 1000 + number + 1_000_000 * part)(machine_for(context))
    options = hypothesis_settings(
        max_examples=examples,
        stateful_step_count=settings.steps,
        deadline=None,  # a per-example time limit: examples of a real adapter are as slow as the adapter
        database=None,  # a run depends on its seed only, never on examples saved by an earlier run
        derandomize=False,  # the seed decides (`seed` above): each round gets its own
        report_multiple_bugs=False,
        print_blob=False,
        phases=(Phase.explicit, Phase.generate),
        # too_slow is the one health check judged by the clock: one seed must give one result on any machine.
        # The others (filter_too_much, data_too_large, large_base_example, ...) stay on.
        suppress_health_check=[HealthCheck.too_slow],
    )
    say(f"{label}: {examples} examples of up to {settings.steps} steps")
    context.failing = None
    try:
        # The reporter: the program Hypothesis prints, which the scenario says better.
        with with_reporter(lambda value: None), seed_decides():
            run_state_machine_as_test(machine, settings=options)
    except Violation as violation:
        return violation
    except FaultAbort as abort:  # the run ends at the first fault: nothing to shrink
        return abort.fault
    except Flaky as flaky:
        failing, context.failing = context.failing, None
        if failing is not None:
            anomalies, session = failing
            if context.capabilities.deterministic:
                context.flaky.append(_flaky_finding(flaky, session))
            return Violation(anomalies, session)
        if not context.capabilities.deterministic:
            return None
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
    return None


def _flaky_finding(flaky: Exception, session: AnySession) -> Finding:
    """KS-GEN-5: an example failed, then passed (or drew differently) when Hypothesis ran its operations again."""
    anomaly = Anomaly(
        "nondeterministic",
        -1,
        (),
        Explanation(
            (f"the {len(session.steps)} operations of an example that failed, run again by Hypothesis",),
            f"the second run differed ({type(flaky).__name__}), but an implementation emits the same events for "
            "the same operations (KS-GEN-5)",
        ),
    )
    config = dict(session.config)
    scenario = Scenario(config, list(session.steps), covers=["KS-GEN-5"], anomalies=["nondeterministic"])
    return Finding([anomaly], config, scenario, [])


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
    probe = _many_keys_probe(examples[0][0], context.capabilities)
    if probe is not None:
        examples = [*examples, probe]
    runs: list[list[list[str] | None]] = []
    for fresh in (False, True):
        if fresh and context.connection is not None:
            context.connection.close()
            context.connection = None
        connection = context.live_connection()
        traces: list[list[str] | None] = []
        for config, steps in examples:
            replayed = replay(
                Scenario(config, steps),
                connection,
                context.capabilities,
                context.implementation,
                check_stats=False,
                batch=context.batch,
            )
            # an example that cannot be replayed is left out; the others are still compared
            traces.append(None if replayed.session is None else events_signature(replayed.session.trace))
        runs.append(traces)
    for (config, steps), before, after in zip(examples, runs[0], runs[1], strict=True):
        if before is None or after is None:
            continue
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


def _many_keys_probe(config: dict[str, Any], capabilities: Capabilities) -> tuple[dict[str, Any], list[Step]] | None:
    """Eight keys waiting, then one consumer that takes them all in one pass: the pass's key order is what a
    hash seed chosen at start would vary (KS-GEN-5). It runs under a configuration the adapter has accepted,
    so that every run checks it, not only those whose richest examples happened to have several keys ready."""
    if not {"publish", "add_consumer"} <= set(capabilities.ops):
        return None
    steps = [Step(op={"op": "publish", "offset": n, "key": f"k{n}"}) for n in range(8)]
    join: dict[str, Any] = {"op": "add_consumer", "consumer": "c1", "capacity": 8, "filters": []}
    if config.get("selector") == "pulsar-sticky":
        join["ranges"] = [[0, SLOTS - 1]]
    return _unbounded(config, capabilities.config_values), [*steps, Step(op=join), Step(settle="oldest")]


def _unbounded(config: dict[str, Any], declared: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """`config` with what would let fewer than eight keys into one pass lifted, as far as the adapter's declared
    values allow: a drawn window (1 to 6) back to the spec's default, the look-ahead bound and permits back to the
    window and capacity. Under a window of 1 every start would read and deliver the keys in one order."""
    probe = dict(config)
    if "window" in probe:
        if "window" in declared:
            probe["window"] = max(declared["window"])
        else:
            del probe["window"]
    if probe.get("read_bound") == "lookahead" and "window" in declared.get("read_bound", ()):
        probe["read_bound"] = "window"
        for name in ("lookahead_per_consumer", "lookahead_per_subscription"):
            probe.pop(name, None)
    if probe.get("flow_control") == "permits" and "capacity" in declared.get("flow_control", ()):
        probe["flow_control"] = "capacity"
    return probe


def describe_catalogue() -> list[tuple[str, str, str]]:
    """(anomaly, requirement, stage) for every check, for `--help`-style listings."""
    return [(k.name, k.requirement, k.stage.value) for k in RULES if k.name in BY_NAME]


def judge_session(session: Session) -> list[Anomaly]:
    """All anomalies a finished session found."""
    return list(session.anomalies)
