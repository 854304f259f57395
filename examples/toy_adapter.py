"""A toy in-memory Key-Shared dispatcher speaking the adapter protocol v2 over stdio (spec/adapter-protocol.md).

Strict profile, selector `any`, consumer capacity, acks and leaves; nothing else. Standard library only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

IMPLEMENTATION = {"name": "toy-adapter", "version": "1.0", "language": "python"}
CAPABILITIES = {  # what it does; whatever is not declared here the kit never sends, and skips what needs it
    "profiles": ["strict"],  # one message of a key in flight at a time
    "selectors": ["any"],  # no key-to-consumer map: any member with room takes a free key
    "ops": ["publish", "add_consumer", "remove_consumer", "ack"],
    "window": False,  # no read-ahead window: every published message is ready at once
    "cursor": False,  # no persisted cursor (and no restart)
}


def refuse(code: str, message: str, **extra: str) -> dict[str, Any]:
    """A refusal the spec defines (KS-GEN-4, KS-CFG-1): nothing happened."""
    return {"ok": False, "error": {"code": code, "message": message, **extra}}


class Toy:
    """One subscription: the log of keys, who holds each unresolved offset, and the members in join order."""

    def reset(self, config: dict[str, Any]) -> dict[str, Any]:
        """A fresh subscription; every configuration field but profile strict and selector any is refused."""
        for field, value in config.items():
            if {field: value} not in ({"profile": "strict"}, {"selector": "any"}):
                return refuse("invalid_config", f"unsupported: {field} = {value}", field=field)
        self.keys: list[str] = []  # the log: offset -> key
        self.holder: dict[int, str | None] = {}  # unresolved offset -> its consumer, None while pending
        self.attempts: dict[int, int] = {}  # offset -> deliveries so far
        self.members: dict[str, int] = {}  # name -> capacity, in join order
        return {"ok": True, "events": []}

    def op(self, op: dict[str, Any]) -> dict[str, Any]:
        """Refuse what the spec refuses, else perform the op and a dispatch pass: their events are its effects."""
        name, consumer = op["op"], op.get("consumer")
        if name == "publish" and op["offset"] != len(self.keys):
            return refuse("invalid_argument", f"the next offset is {len(self.keys)}")
        if name == "add_consumer" and consumer in self.members:
            return refuse("duplicate_consumer", f"{consumer} is a member")
        if name == "add_consumer" and (op["capacity"] < 1 or op["filters"]):
            return refuse("invalid_argument", "capacity must be >= 1, and filters are not supported")
        if name in ("remove_consumer", "ack") and consumer not in self.members:
            return refuse("unknown_consumer", f"no member named {consumer}")
        events = getattr(self, name)(op)
        return {"ok": True, "events": events + self.dispatch()}

    def publish(self, op: dict[str, Any]) -> list[dict[str, Any]]:
        """Append the message; it is pending at once (no window), so the dispatch pass may deliver it."""
        self.keys.append(op["key"])
        self.holder[op["offset"]] = None
        return []

    def add_consumer(self, op: dict[str, Any]) -> list[dict[str, Any]]:
        """A new member, last in join order; a reused name starts with nothing held (KS-GEN-3)."""
        self.members[op["consumer"]] = op["capacity"]
        return []

    def remove_consumer(self, op: dict[str, Any]) -> list[dict[str, Any]]:
        """The leaver's deliveries end unresolved: pending again, for the next dispatch pass (KS-MEM-1)."""
        del self.members[op["consumer"]]
        for offset, holder in self.holder.items():
            if holder == op["consumer"]:
                self.holder[offset] = None
        return []

    def ack(self, op: dict[str, Any]) -> list[dict[str, Any]]:
        """An ack from the holder resolves the message (KS-ACK-1); any other is ignored and recorded (KS-ACK-2)."""
        offset, consumer = op["offset"], op["consumer"]
        if self.holder.get(offset, "") == consumer:
            del self.holder[offset]
            return [{"event": "ack", "offset": offset, "key": self.keys[offset], "consumer": consumer}]
        reason = "unknown-offset" if offset >= len(self.keys) else "not-holder" if offset in self.holder else "resolved"
        return [{"event": "ack_ignored", "offset": offset, "consumer": consumer, "reason": reason}]

    def dispatch(self) -> list[dict[str, Any]]:
        """Deliver each key's earliest unresolved message, when it is pending, to the first member with room."""
        events, seen = [], set()
        for offset, holder in self.holder.items():  # in offset order
            key = self.keys[offset]
            if key in seen:  # strict: a key's next message waits until the earlier one is resolved
                continue
            seen.add(key)
            held = list(self.holder.values())
            free = [name for name, capacity in self.members.items() if held.count(name) < capacity]
            if holder is None and free:
                self.holder[offset] = free[0]
                attempt = self.attempts[offset] = self.attempts.get(offset, 0) + 1
                events.append(
                    {"event": "deliver", "offset": offset, "key": key, "consumer": free[0], "attempt": attempt}
                )
        return events


def serve(toy: Toy) -> None:
    """One JSON response line per request line, until `stop` (spec/adapter-protocol.md section 1)."""
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "stop":
            return
        if request["cmd"] == "start":
            if request["version"] != 2:
                sys.exit(f"toy adapter: speaks protocol version 2 only, not {request['version']}")
            response = {"version": 2, "implementation": IMPLEMENTATION, "capabilities": CAPABILITIES}
        elif request["cmd"] == "reset":
            response = {"seq": request["seq"], **toy.reset(request["config"])}
        else:  # "op": stats and replay are never sent, as the capabilities declare neither
            response = {"seq": request["seq"], **toy.op(request["op"])}
        print(json.dumps(response), flush=True)


if __name__ == "__main__":
    serve(Toy())
