"""What a conformance run searches, and what it has found so far.

The strata (one profile and poison policy each, searched by their own rounds), the configurations the
state machine draws (only what the adapter declares, minus what it refused), and `RunContext`, which every
example and replay of a run shares: the adapter, its declarations, what was exercised, and the first
example of every anomaly kind seen. Kept apart from machine.py, which only draws and judges operations.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st
from ks_spec.departures import departures_of
from ks_spec.slots import SLOT_SELECTORS

from ks_conformance.anomalies import Anomaly
from ks_conformance.batch import AnySession
from ks_conformance.harness import Step
from ks_conformance.protocol import Capabilities, Connection
from ks_conformance.shrink import Shape, shape_of, trace_of, trigger_of

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn, SearchStrategy


@dataclass(frozen=True)
class Observation:
    """The first example of a run in which an anomaly kind was seen: replayable even if it is never shrunk."""

    anomaly: Anomaly
    config: dict[str, Any]
    steps: list[Step]
    trace: list[dict[str, Any]]
    earlier: list[Anomaly]
    """The anomalies of other kinds the same example showed before it (it may be their consequence)."""
    tolerates: list[str]
    """The kinds the example's settles went on past (the run had found them already)."""
    shape: Shape | None = None
    """The anomaly's shape (shrink.py): a kind seen with two causes has an observation for each."""


@dataclass
class Tally:
    """How often a run saw one shape: examples (shrink replays included), and per op it was found in."""

    examples: int = 0
    triggers: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Stratum:
    """A slice of the configuration space searched by its own Hypothesis runs: one profile, one poison policy.

    Hypothesis favours the first values of a choice; running each profile and policy separately (and
    rotating the order of selectors) makes every combination the implementation declares get its share.
    """

    profile: str
    poison_policy: str | None
    selectors: tuple[str, ...]

    @property
    def label(self) -> str:
        """profile/policy, for progress lines."""
        return self.profile + (f"/{self.poison_policy}" if self.poison_policy else "")


def strata(capabilities: Capabilities) -> list[Stratum]:
    """Every profile the implementation declares, crossed with its poison policies (if it can fail deliveries)."""
    found: list[Stratum] = []
    can_fail = "nack" in capabilities.ops or capabilities.ack_timeout
    for profile in capabilities.profiles:
        policies: tuple[str | None, ...] = (None,)
        if profile != "best-effort" and can_fail and capabilities.poison_policies:
            policies = capabilities.poison_policies
        for policy in policies:
            turn = len(found) % len(capabilities.selectors)
            selectors = capabilities.selectors[turn:] + capabilities.selectors[:turn]
            found.append(Stratum(profile, policy, selectors))
    return found


@dataclass
class RunContext:
    """What every example of a run shares: the adapter, what it declared, and what was found so far."""

    connect: Callable[[], Connection]
    capabilities: Capabilities
    implementation: dict[str, Any]
    stratum: Stratum | None = None
    check_stats: bool = True
    suppressed: set[str] = field(default_factory=set)
    exercised: dict[str, int] = field(default_factory=dict)
    skipped_ops: dict[str, str] = field(default_factory=dict)
    examples: int = 0
    steps: int = 0
    kept: list[tuple[dict[str, Any], list[Step]]] = field(default_factory=list)
    """The passing examples with the most events so far, most first: what the determinism check replays."""
    keep: int = 5
    _kept_events: list[int] = field(default_factory=list, init=False, repr=False)
    connection: Connection | None = None
    batch: bool = False
    """Drive the adapter through `replay` (a `BatchSession`), a chunk of ops at a time."""
    chunk: int = 12
    observed: dict[Shape, Observation] = field(default_factory=dict)
    """Per shape (an anomaly kind and its cause), the first example that showed it (shrink attempts included)."""
    tallies: dict[Shape, Tally] = field(default_factory=dict)
    """Per shape, how many examples showed it, and in which ops."""
    failing: tuple[list[Anomaly], AnySession] | None = None
    """The example that ended the current Hypothesis run (new kinds), kept in case its rerun passes (`Flaky`)."""
    flaky: list[Any] = field(default_factory=list)
    """KS-GEN-5 findings of a deterministic adapter whose failing example passed when Hypothesis reran it."""
    _tallied: tuple[AnySession | None, set[Shape]] = field(default=(None, set()), init=False, repr=False)
    refused_values: dict[str, list[Any]] = field(default_factory=dict)
    """Configuration values the adapter refused with invalid_config although it did not declare them."""
    departures: dict[str, int] = field(default_factory=dict)
    """Per departure (spec section 21.1, by its label), how many examples ran under a configuration taking it."""

    def observe(self, session: AnySession, found: list[Anomaly]) -> None:
        """Record the first example of each shape in `found`, with what preceded it, and count the examples of
        each shape; keep the example as `failing` when it shows a kind not found yet (it ends the run)."""
        if self.failing is None and any(a.name not in self.suppressed for a in found):
            self.failing = (list(found), session)
        counted, shapes = self._tallied
        if counted is not session:
            shapes = set()
            self._tallied = (session, shapes)
        trace = trace_of(session)
        for anomaly in found:
            shape = shape_of(anomaly, session)
            tally = self.tallies.setdefault(shape, Tally())
            if shape not in shapes:
                shapes.add(shape)
                tally.examples += 1
                trigger = trigger_of(anomaly, trace)
                tally.triggers[trigger] = tally.triggers.get(trigger, 0) + 1
            if shape in self.observed:
                continue
            position = next((i for i, a in enumerate(session.anomalies) if a is anomaly), len(session.anomalies))
            earlier = [a for a in session.anomalies[:position] if a.name != anomaly.name]
            self.observed[shape] = Observation(
                anomaly,
                dict(session.config),
                list(session.steps),
                list(session.trace),
                earlier,
                sorted(session.tolerated),
                shape,
            )

    def live_connection(self) -> Connection:
        """The started connection, restarted if an earlier fault left it unusable."""
        connection = self.connection
        if connection is None or getattr(connection, "dead", None) is not None:
            if connection is not None:
                connection.close()
            connection = self.connect()
            connection.start()
            self.connection = connection
        return connection

    def collect(self, session: AnySession) -> None:
        """Add one finished example's exercised counts and skipped ops to the run's."""
        self.examples += 1
        self.steps += len(session.steps)
        for name, count in session.checker.exercised.items():
            if session.checker.applies(name):
                self.exercised[name] = self.exercised.get(name, 0) + count
        for name, count in session.harness_exercised.items():
            self.exercised[name] = self.exercised.get(name, 0) + count
        self.skipped_ops.update(session.skipped_ops)
        for departure in departures_of(session.config):
            self.departures[departure.label] = self.departures.get(departure.label, 0) + 1
        if session.steps and not session.anomalies:
            self._keep_if_rich(session)

    def _keep_if_rich(self, session: AnySession) -> None:
        """Keep the example if it is among the `keep` with the most events: Hypothesis tries tiny examples
        first, and an order that depends on the run only shows when several keys are delivered."""
        events = len(session.trace)
        if len(self.kept) >= self.keep and events <= self._kept_events[-1]:
            return
        at = next((i for i, kept in enumerate(self._kept_events) if events > kept), len(self._kept_events))
        self._kept_events.insert(at, events)
        self.kept.insert(at, (dict(session.config), list(session.steps)))
        del self._kept_events[self.keep :], self.kept[self.keep :]


DRAWN_VALUES: dict[str, tuple[Any, ...]] = {
    "ack_timeout": (2, 1, 0, 3),
    "max_redeliveries": (0, 1, 2),
    "backoff_base": (1, 0, 2),
    "persist_interval": (0, 2, 1, 3),
    "evict_after": (2, 0, 1, 3),
}
"""The values the kit draws for a timing field the adapter declares nothing about, most telling first."""


def usable_values(capabilities: Capabilities, refused: Mapping[str, Collection[Any]], name: str) -> list[Any]:
    """The values of a timing field the kit may still draw: the declared ones, or its own, minus refused ones."""
    candidates = capabilities.config_values.get(name, DRAWN_VALUES.get(name, ()))
    return [v for v in candidates if v not in refused.get(name, ())]


def configs(
    capabilities: Capabilities,
    stratum: Stratum | None = None,
    refused: Mapping[str, Collection[Any]] | None = None,
) -> SearchStrategy[dict[str, Any]]:
    """Configurations within the declared capabilities (and the stratum), small enough that every rule matters.

    Values that make things happen come first (Hypothesis favours them): short ack timeouts and eviction
    delays, few redeliveries, small windows. A field whose values the adapter declares (`config_values`)
    takes only those.
    """
    declared = capabilities.config_values
    refusals: Mapping[str, Collection[Any]] = refused if refused is not None else {}

    @st.composite
    def draw_config(draw: DrawFn) -> dict[str, Any]:
        def values(name: str, default: SearchStrategy[Any]) -> Any:
            """A declared value, else the kit's own draw; values refused once are not drawn again (None: none left)."""
            if name not in declared and not refusals.get(name):
                return draw(default)
            candidates = declared.get(name, DRAWN_VALUES.get(name, ()))
            left = [v for v in candidates if v not in refusals.get(name, ())]
            return draw(st.sampled_from(left)) if left else None

        if stratum is not None:
            profile, selectors = stratum.profile, stratum.selectors
        else:
            profile, selectors = draw(st.sampled_from(capabilities.profiles)), capabilities.selectors
        selector = draw(st.sampled_from(selectors))
        config: dict[str, Any] = {"profile": profile, "selector": selector}
        if capabilities.window and ("window" in declared or draw(st.booleans())):
            config["window"] = values("window", st.integers(1, 6))
        if selector in ("ring", "pulsar-consistent") and ("points" in declared or draw(st.booleans())):
            config["points"] = values("points", st.integers(1, 8))
        ops = capabilities.ops
        if profile != "best-effort":
            if capabilities.ack_timeout:
                config["ack_timeout"] = values("ack_timeout", st.sampled_from(DRAWN_VALUES["ack_timeout"]))
            if "nack" in ops or capabilities.ack_timeout:
                config["max_redeliveries"] = values(
                    "max_redeliveries", st.sampled_from(DRAWN_VALUES["max_redeliveries"])
                )
                base = values("backoff_base", st.sampled_from(DRAWN_VALUES["backoff_base"]))
                config["backoff_base"] = base
                if "backoff_max" in declared:
                    fitting = [v for v in declared["backoff_max"] if base is None or v >= base]
                    config["backoff_max"] = draw(st.sampled_from(fitting or list(declared["backoff_max"])))
                elif base is not None:
                    config["backoff_max"] = base + draw(st.integers(0, 3))
                if stratum is not None and stratum.poison_policy is not None:
                    config["poison_policy"] = stratum.poison_policy
                elif capabilities.poison_policies:
                    config["poison_policy"] = draw(st.sampled_from(capabilities.poison_policies))
            if capabilities.cursor:
                config["persist_interval"] = values(
                    "persist_interval", st.sampled_from(DRAWN_VALUES["persist_interval"])
                )
            if capabilities.persist_ack_holes and capabilities.cursor:
                config["persist_ack_holes"] = values("persist_ack_holes", st.booleans())
        if "disconnect" in ops:
            config["evict_after"] = values("evict_after", st.sampled_from(DRAWN_VALUES["evict_after"]))
        if selector == "partitions":
            config["partitions"] = values("partitions", st.integers(1, 4))  # few: keys share partitions
        if selector == "buckets":
            config["bucket_budget"] = values("bucket_budget", st.integers(1, 4))
            config["bucket_max"] = values("bucket_max", st.integers(4, 8))
        # Options drawn only from the values an adapter declares (spec section 20, protocol v2 `config_values`).
        for name, applies in (
            ("drain_granularity", selector in SLOT_SELECTORS),
            ("tick_order", profile != "best-effort"),
            ("bucket_assignment", selector == "buckets"),
            ("checkpoint_resume", selector == "buckets" and profile != "best-effort"),
            ("flow_control", profile != "best-effort"),
            ("read_bound", profile != "best-effort"),
            ("park_after", profile != "best-effort"),
            ("returns_as_failures", profile != "best-effort"),
            ("max_unacked", profile != "best-effort"),
            ("out_of_order", profile == "owner"),
            ("controller_moves", selector == "buckets"),
            ("read_trigger", profile != "best-effort"),
            ("timer_slack", True),
            ("ack_by_id", profile != "best-effort"),
            ("persist_trigger", profile != "best-effort" and capabilities.cursor),
            ("persist_flush", profile != "best-effort" and capabilities.cursor),
            ("layout", selector == "buckets"),
        ):
            if applies and name in declared:
                config[name] = values(name, st.nothing())
        if config.get("controller_moves") and config.get("bucket_assignment") != "controller":
            config.pop("controller_moves")  # only the controller policy moves buckets on its own (KS-CFG-1)
        if config.get("persist_flush") and config.get("persist_trigger") != "advance":
            config.pop("persist_flush")  # the flush backs up persistence on an advance only (KS-CFG-1)
        if config.get("flow_control") == "permits" and "flow" not in ops:
            config.pop("flow_control")  # permits nobody can grant would starve every consumer: not drawn
        if config.get("read_bound") == "lookahead":
            for name in ("lookahead_per_consumer", "lookahead_per_subscription"):
                if name in declared:
                    config[name] = values(name, st.nothing())
            if config.get("lookahead_per_consumer") == 0 and config.get("lookahead_per_subscription") == 0:
                config.pop("lookahead_per_subscription")  # both 0 is refused (KS-CFG-1): keep the default
        return {name: value for name, value in config.items() if value is not None}

    return draw_config()
