"""A conformance run: the suite against one adapter, from `start` to a verdict per requirement.

`run_suite` probes the configuration refusals (KS-CFG-1), runs the Hypothesis state machine in rounds
(each round looks for violations of anomaly kinds not found yet and ends at the first example that shows
one; kinds found before are recorded and looked past, never allowed to end an example), shrinks each new
kind of that example to its own minimal scenario (shrink.py: counted replays, no Hypothesis shrinking),
then shrinks every other kind seen anywhere the same way (a kind seen in any example or replay fails its
requirement), replays the passing examples with the most events on the adapter and on a newly started one
to check determinism (KS-GEN-5), and turns it all into one status per requirement: passed, failed,
warning, vacuous, skipped or untested (spec/report-format.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS
from ks_spec.errors import UserError
from ks_spec.requirements import load_index

from ks_conformance import report
from ks_conformance.anomalies import Anomaly, Explanation, requirement_levels, requirement_profiles
from ks_conformance.batch import AnySession
from ks_conformance.catalogue import BY_NAME, CATALOGUE, INDIRECT, checks_of
from ks_conformance.determinism import seed_decides
from ks_conformance.harness import FILTER_SELECTORS_REFUSED, SLOTS, Session, Step
from ks_conformance.machine import FaultAbort, Violation, machine_for
from ks_conformance.protocol import AdapterFault, Capabilities, Connection, StartInfo
from ks_conformance.scenario import Scenario, events_signature, replay, write_scenario
from ks_conformance.search import Observation, RunContext, Stratum, strata, usable_values
from ks_conformance.shrink import Witness, shrink


@dataclass(frozen=True)
class RunSettings:
    """How hard a run looks: Hypothesis examples and steps per round, rounds, and the seed."""

    profile: str
    max_examples: int
    """Hypothesis examples per stratum (profile x poison policy) and round, at least."""
    steps: int
    rounds: int
    """At most this many rounds per stratum, each of its examples (however many end at a new kind); the next
    round runs only if this one found something."""
    examples_total: int = 0
    """Examples per round over all strata: an implementation declaring few strata gets more per stratum."""
    seed: int = 0
    batch_chunk: int = 12
    """In batch mode: ops per replay while an example is drawn."""
    coverage_rounds: int = 2
    """Extra rounds over every stratum while a MUST requirement's checks were never exercised."""
    determinism_replays: int = 3
    shrinks: int = 100
    """Replays per witness when shrinking (shrink.py): a count, never seconds, so that one seed gives one result."""
    shrink_cap_seconds: int = 600
    """A wall-clock safety cap on shrinking one witness; the report lists it under `limits` if it ever fires."""

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
    path: Path | None = None
    earlier: list[Anomaly] = field(default_factory=list)
    """Anomalies of kinds found before that the same example showed first: this one may be their consequence."""
    shrunk: bool = True
    """False when replaying the example did not show the kind again, so it could not be shrunk: the scenario is
    the example as it ran."""


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
                if found is None:
                    break
                new = True
                if isinstance(found, AdapterFault):
                    result.faults.append((found, None))
                    say(f"{stratum.label}: adapter fault ({found.kind}): {found.message}")
                elif isinstance(found, Finding):  # an example that failed once only: the rest of the round is moot
                    add(found)
                    break
                else:
                    kinds = sorted({a.name for a in found.anomalies} - context.suppressed)  # the step's new kinds
                    context.suppressed.update(kinds)
                    say(f"{stratum.label}: found {', '.join(kinds)}")
                    base = _example(found.session)
                    for kind in kinds:
                        add(_witness(context, result, base, kind, _Seen.of_violation(found, kind), label, say))
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
    result.exercised = dict(context.exercised)
    result.skipped_ops = dict(context.skipped_ops)
    result.refused_values = {name: list(values) for name, values in context.refused_values.items()}
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

    @classmethod
    def of_violation(cls, violation: Violation, kind: str) -> _Seen:
        """`kind` as the example that raised `violation` showed it."""
        session = violation.session
        anomalies = [a for a in violation.anomalies if a.name == kind]
        earlier = [a for a in session.anomalies if a.name != kind and not any(a is new for new in anomalies)]
        trace, steps = list(session.trace), list(session.steps)
        return cls(anomalies, dict(session.config), steps, trace, earlier, sorted(session.tolerated))

    @classmethod
    def of_observation(cls, seen: Observation) -> _Seen:
        """A kind recorded while the run searched for others."""
        config, steps, trace = dict(seen.config), list(seen.steps), list(seen.trace)
        return cls([seen.anomaly], config, steps, trace, list(seen.earlier), list(seen.tolerates))


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
    """Shrink `base` to a witness of `kind` by counted replays (shrink.py) and make it a finding.

    Every replay's anomalies are recorded (a kind first shown by a replay is shrunk later in its turn). If
    the example's replay no longer shows the kind, the finding keeps the example as it ran (`shrunk` False).
    """
    settings = result.settings
    replayed, record = partial(_replayed, context), partial(_record, context)
    witness = shrink(base, kind, replayed, settings.shrinks, cap_seconds=settings.shrink_cap_seconds, on_replay=record)
    _report_shrink(witness, result, label, say)
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
        return finding
    position = next(i for i, a in enumerate(session.anomalies) if a.name == kind)
    found = session.anomalies[position]
    scenario = witness.scenario
    scenario.covers = sorted({a.requirement for a in session.anomalies})
    scenario.anomalies = sorted({a.name for a in session.anomalies})
    scenario.description = f"{kind} found by the conformance suite"
    scenario.found = origin
    finding = Finding([found], dict(scenario.config), scenario, list(session.trace))
    finding.earlier = [a for a in session.anomalies[:position] if a.name != kind]
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
    """A shrunk finding for every anomaly kind some example (or replay) showed that no round ended on:
    a requirement violated anywhere in the run is never reported passed, and each kind has its own witness."""
    found = {a.name for f in result.findings for a in f.anomalies}
    while not result.faults:
        pending = sorted(name for name in context.observed if name not in found)
        if not pending:
            return
        name = pending[0]
        seen = context.observed[name]
        base = Scenario(dict(seen.config), list(seen.steps), tolerates=list(seen.tolerates))
        say(f"seen while searching for other kinds: {name}")
        add(_witness(context, result, base, name, _Seen.of_observation(seen), "observed", say))
        found.add(name)


FORM_OPTIONS = ("flow_control", "read_bound", "tick_order", "drain_granularity", "park_after")
"""Options whose other forms reshape every example (spec section 20): coverage rounds keep their defaults unless a
missing check needs them."""


def _plain_for(requirements: Sequence[str], declared: Capabilities, result: RunResult) -> Capabilities:
    """The capabilities a coverage round draws from: the declared ones, minus every form option that none of the
    checks of `requirements` needs (each draws its default), so that the round spends its examples on them."""

    def exercisable(capabilities: Capabilities) -> set[str]:
        return {
            requirement
            for requirement in requirements
            for kind in checks_of(requirement)
            if _needs(kind.name, capabilities, result.skipped_ops, result.refused_values) is None
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
            and _needs(kind.name, narrowed, result.skipped_ops, result.refused_values) is None
            for requirement in requirements
            for kind in checks_of(requirement)
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
    more to report it; the kit shrinks each kind it shows itself (`_witness`), by counted replays. A Finding
    is returned only when that second run passed: the same operations gave different results (KS-GEN-5).
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
    try:
        # The reporter: the program Hypothesis prints, which the scenario says better.
        with with_reporter(lambda value: None), seed_decides():
            run_state_machine_as_test(machine, settings=options)
    except Violation as violation:
        return violation
    except FaultAbort as abort:  # the run ends at the first fault: nothing to shrink
        return abort.fault
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
    return None


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
    return dict(config), [*steps, Step(op=join), Step(settle="oldest")]


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
    # Filters are drawn only under a selector that takes them (the others refuse them, spec section 5).
    filtering = capabilities.filters and bool(selectors - set(FILTER_SELECTORS_REFUSED))
    no_filters = "capability filters and a selector that takes them (not pulsar-auto-split, pulsar-sticky, buckets)"

    def forms(field_name: str) -> list[Any]:
        """The values of an option the kit may draw: the declared ones, else the default alone."""
        declared = capabilities.config_values.get(field_name, [CONFIG_DEFAULTS[field_name]])
        return [v for v in declared if v not in refusals.get(field_name, ())]

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
        "reconnect-ignored": need("reconnect" in ops and "disconnect" in ops, "op reconnect"),
        "filter-violation": need(filtering, no_filters),
        "unjustified-filter": need(filtering, no_filters),
        "unfiltered-wait": need(filtering and fixed_target, no_filters),
        "unjustified-outcome": None,
        "filtered-without-members": need(filtering and "remove_consumer" in ops, no_filters),
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
        or need(bool(selectors - {"any"}), "a selector with key affinity (with any, a held key never moves: no drain)")
        or need(
            "owner" in capabilities.profiles and bool(selectors - {"any", "buckets"}),
            "the owner profile with a selector other than any and buckets (in strict a key's next message waits for "
            "the previous one, and under buckets a moving bucket is withheld instead, KS-BKT-4: no key drains)",
        ),
        "key-moved": need(bool(selectors - {"any"}), "a selector with key affinity (not any)"),
        "phase-order": need("tick" in ops, "op tick"),
        "lost": need("remove_consumer" in ops or "disconnect" in ops, "op remove_consumer or disconnect"),
        "split-owner": need(len(capabilities.profiles) > 0, ""),
        "unstable-assignment": need(bool(selectors - {"buckets", "any"}), "a selector other than buckets and any"),
        "idle-while-ready": need(fixed_target, "a selector with a fixed target, or any"),
        "misrouted-bucket": need("buckets" in selectors, "selector buckets"),
        "bucket-misassigned": need("buckets" in selectors, "selector buckets"),
        "unstable-buckets": need("buckets" in selectors, "selector buckets")
        or need(
            bool(set(capabilities.config_values.get("bucket_assignment", ())) - {"sorted"}),
            "bucket_assignment sticky or controller declared in config_values (sorted is exempt from KS-BKT-8)",
        ),
        "bucket-split-owner": need("buckets" in selectors, "selector buckets"),
        "checkpoint-skip": need("buckets" in selectors, "selector buckets"),
        "successor-first": need(
            "buckets" in selectors and bool({"rollover", "split", "merge"} & ops), "op rollover, split or merge"
        ),
        "entry-split": need(
            "buckets" in selectors and "owner" in capabilities.profiles and "publish_entry" in ops,
            "the owner profile, selector buckets and op publish_entry",
        ),
        "checkpoint-resurrected": need("buckets" in selectors and "restart" in ops, "selector buckets and op restart")
        or need(
            True in capabilities.config_values.get("checkpoint_resume", ()),
            "checkpoint_resume true declared in config_values",
        ),
        "capacity-overrun": need(capabilities.capacity, "capability capacity (capacity never binds)")
        or need("capacity" in forms("flow_control"), "flow_control capacity (the adapter declares only permits)"),
        "permit-overrun": need("permits" in forms("flow_control"), "flow_control permits declared in config_values")
        or need("flow" in ops, "op flow (permits nobody can grant are not drawn)"),
        "window-overrun": need(capabilities.window, "capability window (no read-ahead window)")
        or need("window" in forms("read_bound"), "read_bound window (the adapter declares only lookahead)"),
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
