"""Hot keys (PIP-474): how long healthy keys flow behind one stuck consumer. `python -m benchmarks.bench_hotkeys`.

The spec declares the stall conformant (KS-ISO-1, KS-ISO-2: a stuck key delays others only once the window
is full of what it holds back); this measures it on the reference dispatcher. Four consumers share a
subscription; one of them stops acking at tick 0 (its keys are stuck: what it holds is never resolved, and
the messages of its keys queue behind). Every tick publishes `rate` messages over 1,000 keys, a `hot` share
of them on one key owned by the stuck consumer, and the healthy consumers ack all they hold. The figures:

- `healthy delivered`: deliveries to the healthy consumers before the subscription stalls (no delivery at
  all in a tick, with messages unread), and the tick it stalls at;
- `of baseline`: that count over the deliveries of the same ticks with nobody stuck (measured in the same
  run), so 0.10 means the healthy keys got a tenth of their throughput before everything stopped.

Both profiles, both read bounds of spec section 8 (the window, which counts every read unresolved message,
and Pulsar's look-ahead limit, which counts only the waiting ones: held, queued or awaiting redelivery),
limits of 64 to 4,096 messages, and two consumer capacities. A second table runs the same stuck consumer
with parking (spec section 15, KS-ISO-4), the mitigation of PIP-474's discussion this spec adopts as an
option: when it stalls instead, and how many messages it parked. Logical time, so the figures are exact
and the same on every machine.
"""

from __future__ import annotations

import argparse
import itertools
import random
from dataclasses import dataclass

from ks_reference.dispatcher import Dispatcher
from rich.console import Console
from rich.table import Table

from benchmarks import readme

CONSUMERS = ("c0", "c1", "c2", "c3")
KEYS = 1000
HOT_KEY = "hot"


@dataclass(frozen=True)
class Case:
    """One configuration of the measurement."""

    profile: str
    bound: str
    """`window` or `lookahead` (spec section 8 `read_bound`)."""
    limit: int
    """The window, or the look-ahead limit L (`lookahead_per_subscription`)."""
    capacity: int
    hot: float
    rate: int = 32
    park_after: int = 0
    """Parking (spec section 15, KS-ISO-4): a key's messages behind this many unresolved ones leave the bound."""


@dataclass(frozen=True)
class Outcome:
    """What happened until the subscription stalled (or the horizon)."""

    healthy: int
    stalled_at: int | None
    parked: int = 0
    """Messages parked when the run ended: what parking costs (an offset each, KS-ISO-5)."""


def _stuck_consumer(dispatcher: Dispatcher) -> str:
    """The consumer the hot key goes to: it is the one that stops acking."""
    target = dispatcher.target_name(HOT_KEY, None)
    assert target is not None
    return target


def run_case(case: Case, stuck: bool, horizon: int) -> Outcome:
    """Publish and ack tick by tick until nothing is delivered in a tick while messages wait unread."""
    config: dict[str, object] = {"profile": case.profile, "selector": "ring"}
    if case.bound == "window":
        config["window"] = case.limit
    else:
        config.update(read_bound="lookahead", lookahead_per_subscription=case.limit)
    if case.park_after:
        config["park_after"] = case.park_after
    dispatcher = Dispatcher(config)
    for name in CONSUMERS:
        dispatcher.add_consumer(name, case.capacity)
    victim = _stuck_consumer(dispatcher) if stuck else None
    rng = random.Random(7)
    healthy = 0
    for tick in range(1, horizon + 1):
        delivered = 0
        for _ in range(case.rate):
            key = HOT_KEY if rng.random() < case.hot else f"k{rng.randrange(KEYS)}"
            for event in dispatcher.publish(key).events:
                if event["event"] == "deliver":
                    delivered += 1
                    healthy += event["consumer"] != victim
        for name, member in list(dispatcher.members.items()):
            if name == victim:
                continue
            for offset in sorted(member.outstanding):
                for event in dispatcher.ack(name, offset).events:
                    if event["event"] == "deliver":
                        delivered += 1
                        healthy += event["consumer"] != victim
        dispatcher.tick()
        if delivered == 0 and dispatcher.read_position < len(dispatcher.log):
            return Outcome(healthy, tick, dispatcher.parked_count())
    return Outcome(healthy, None, dispatcher.parked_count())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="two small cases: checks the script")
    parser.add_argument("--horizon", type=int, default=400, help="ticks to run at most (default 400)")
    parser.add_argument(readme.FLAG, action="store_true", help=readme.HELP)
    args = parser.parse_args()
    readme.record(args.write_readme, "bench_hotkeys", args.quick)
    limits = (64, 512) if args.quick else (64, 512, 4096)
    capacities = (8,) if args.quick else (8, 64)
    hots = (0.05,) if args.quick else (0.01, 0.05, 0.25)
    table = Table(title="healthy keys behind one stuck consumer (4 consumers, 32 messages a tick, 1,000 keys)")
    columns = ("profile", "read bound", "limit", "capacity", "hot share", "stalls at tick", "healthy delivered")
    for column in (*columns, "of baseline"):
        table.add_column(column, justify="right")
    for profile, bound, limit, capacity, hot in itertools.product(
        ("strict", "owner"), ("window", "lookahead"), limits, capacities, hots
    ):
        case = Case(profile, bound, limit, capacity, hot)
        stuck = run_case(case, True, args.horizon)
        ticks = stuck.stalled_at or args.horizon
        baseline = run_case(case, False, ticks)
        share = stuck.healthy / baseline.healthy if baseline.healthy else 0.0
        table.add_row(
            profile,
            bound,
            f"{limit:,}",
            str(capacity),
            f"{hot:.0%}",
            str(stuck.stalled_at) if stuck.stalled_at is not None else f"> {args.horizon}",
            f"{stuck.healthy:,}",
            f"{share:.2f}",
        )
    Console(width=130).print(table)
    print(
        "A stall is a tick with nothing delivered while messages wait unread: the window is full of messages "
        "the stuck consumer holds or that wait behind it (KS-ISO-2), or, under the look-ahead bound, L messages "
        "wait behind it (KS-ISO-3)."
    )
    Console(width=130).print(parking_table(args.quick, args.horizon))
    print(
        "With park_after = 1 (spec section 15, KS-ISO-4) each stuck key holds one place of the read bound beside "
        "what its consumer holds; its later messages are parked, an offset each (KS-ISO-5), and the cursor "
        "stays behind them. `parked at end` is that cost when the run stalled or reached the horizon."
    )


def parking_table(quick: bool, horizon: int) -> Table:
    """The same stuck consumer with parking on (capacity 8): how much later it stalls, and what parking holds."""
    limits = (64,) if quick else (64, 512)
    hots = (0.05,) if quick else (0.05, 0.25)
    table = Table(title="the same, with parking (park_after = 1, capacity 8)")
    columns = ("profile", "read bound", "limit", "hot share", "stalls without parking", "stalls with parking")
    for column in (*columns, "healthy delivered", "of baseline", "parked at end"):
        table.add_column(column, justify="right")
    for profile, bound, limit, hot in itertools.product(("strict", "owner"), ("window", "lookahead"), limits, hots):
        plain = run_case(Case(profile, bound, limit, 8, hot), True, horizon)
        case = Case(profile, bound, limit, 8, hot, park_after=1)
        parked = run_case(case, True, horizon)
        baseline = run_case(case, False, parked.stalled_at or horizon)
        share = parked.healthy / baseline.healthy if baseline.healthy else 0.0
        table.add_row(
            profile,
            bound,
            f"{limit:,}",
            f"{hot:.0%}",
            _stall(plain, horizon),
            _stall(parked, horizon),
            f"{parked.healthy:,}",
            f"{share:.2f}",
            f"{parked.parked:,}",
        )
    return table


def _stall(outcome: Outcome, horizon: int) -> str:
    return f"tick {outcome.stalled_at}" if outcome.stalled_at is not None else f"> {horizon}"


if __name__ == "__main__":
    readme.run(main)
