"""A dispatcher process to be killed: it publishes, acks out of order and ticks until SIGKILL arrives.

It prints each intention (`publish N`, `ack N`) on stdout, flushed, *before* performing it, so
that the parent knows a superset of what was published and resolved when the process died.
Usage: python -m reference_support.crash_child STORE [holes]
"""

from __future__ import annotations

import random
import sys

from ks_reference.dispatcher import Dispatcher
from ks_reference.store import SqliteStore

CONFIG = {"profile": "owner", "window": 64, "persist_interval": 2, "ack_timeout": 0}


def config(holes: bool) -> dict[str, object]:
    """The configuration both the child and the parent use."""
    return {**CONFIG, "persist_ack_holes": holes}


def main() -> None:
    path, holes = sys.argv[1], len(sys.argv) > 2 and sys.argv[2] == "holes"
    dispatcher = Dispatcher(config(holes), SqliteStore(path, config(holes)))
    rng = random.Random(7)
    for name in ("c1", "c2", "c3"):
        dispatcher.add_consumer(name, 16)
    out = sys.stdout
    for step in range(10**7):
        roll = rng.random()
        if roll < 0.45:
            out.write(f"publish {len(dispatcher.log)}\n")
            out.flush()
            dispatcher.publish(f"k{rng.randrange(40)}")
        elif roll < 0.9:
            held = sorted((offset, name) for name, m in dispatcher.members.items() for offset in m.outstanding)
            if held:
                offset, name = rng.choice(held)  # acks in random order leave holes above the cursor
                out.write(f"ack {offset}\n")
                out.flush()
                dispatcher.ack(name, offset)
        else:
            dispatcher.tick()
        if step == 200:
            out.write("ready\n")
            out.flush()


if __name__ == "__main__":
    main()
