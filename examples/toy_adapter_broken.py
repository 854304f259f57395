"""The toy dispatcher with one deliberate bug, for the walk-through in examples/README.md: a leaving consumer's
unacked messages leave with it, as if they had been acked (Danube's at-most-once eviction, spec section 21).
"""

from __future__ import annotations

from typing import Any

from toy_adapter import IMPLEMENTATION, Toy, serve


class ForgetfulToy(Toy):
    """Toy, except that `remove_consumer` forgets what the leaver held instead of making it pending again."""

    def remove_consumer(self, op: dict[str, Any]) -> list[dict[str, Any]]:
        """The bug: the leaver's deliveries are dropped silently, so nobody ever gets those messages (KS-MEM-1)."""
        del self.members[op["consumer"]]
        self.holder = {offset: holder for offset, holder in self.holder.items() if holder != op["consumer"]}
        return []


if __name__ == "__main__":
    IMPLEMENTATION["name"] = "toy-adapter-broken"
    serve(ForgetfulToy())
