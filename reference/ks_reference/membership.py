"""Consumers joining, leaving, disconnecting and being evicted (spec sections 1, 4 and 12)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ks_reference.core import Core, Member, Refusal
from ks_reference.selectors import Range, SelectorRefusal


class Membership(Core):
    """`add_consumer`, `remove_consumer`, `disconnect` and tick phase 4 (eviction)."""

    def check_join(
        self, name: object, capacity: object, filters: object, ranges: object, hash_name: object = None
    ) -> Member:
        """Validate a join and build the new member, or refuse (KS-GEN-4); changes nothing."""
        if not isinstance(name, str) or not name:
            raise Refusal("invalid_argument", f"consumer must be a non-empty string, got {name!r}")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise Refusal("invalid_argument", "consumer name holds a lone surrogate (not valid Unicode)") from None
        if name in self.members:
            # req: KS-GEN-4
            raise Refusal("duplicate_consumer", f"a member named {name!r} already exists")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise Refusal("invalid_argument", f"capacity must be an integer >= 1, got {capacity!r}")
        filter_list = _string_list(filters, "filters")
        if filter_list and not self.selector.takes_filters:
            # req: KS-FLT-5
            raise Refusal("invalid_argument", f"selector '{self.selector.name}' cannot take consumers with filters")
        range_list = _ranges(ranges)
        try:
            self.selector.check_add(name, range_list)
        except SelectorRefusal as refusal:
            raise Refusal("invalid_argument", str(refusal)) from None
        if hash_name is not None:
            if not isinstance(hash_name, str) or not hash_name:
                raise Refusal("invalid_argument", f"hash_name must be a non-empty string, got {hash_name!r}")
            if not self.selector.takes_hash_names:
                # req: KS-GEN-4 (only a selector that hashes consumer names takes one)
                raise Refusal("invalid_argument", f"selector '{self.selector.name}' does not hash consumer names")
        # req: KS-FLW-4 (under permits, the capacity is the first grant)
        member = Member(name, capacity, tuple(filter_list), tuple(range_list), permits=capacity)
        member.hash_name = hash_name
        return member

    def on_join(self, member: Member) -> None:
        """A new member (a new incarnation, even under a reused name: KS-GEN-3) joins the ring."""
        if member.hash_name is not None:
            self.selector.hash_as(member.name, member.hash_name)  # req: KS-ASN-5 (a name several members may share)
        self.selector.add(member.name, member.ranges)
        self.members[member.name] = member
        self.membership_changed()

    def on_leave(self, member: Member) -> None:
        """A member leaves: every delivery it holds ends and its messages are pending at once (KS-MEM-1).

        In best-effort the member's channel goes with it: its unreceived messages already had
        their outcome (the delivery) and are not sent again.
        """
        for offset in sorted(member.outstanding):
            if not self.config.reliable:
                self.best_effort_holder.pop(offset, None)
                continue
            message = self.messages.get(offset)
            if message is not None:
                # req: KS-MEM-1, KS-RTY-7
                self.return_to_pending(message)
        member.outstanding.clear()
        self.selector.remove(member.name)
        del self.members[member.name]
        self.membership_changed()

    def on_disconnect(self, member: Member) -> None:
        """The member stays a member but receives nothing (KS-MEM-3); a second report changes nothing."""
        if member.connected:
            member.connected = False
            member.disconnected_at = self.now

    def on_reconnect(self, member: Member) -> None:
        """A disconnected member is connected again with all it holds, and its eviction is off (KS-MEM-4)."""
        # req: KS-MEM-4 (a connected member's reconnect changes nothing; a later disconnect starts a new clock)
        member.connected = True

    def on_flow(self, member: Member, permits: int) -> None:
        """A member grants more permits (`flow_control = "permits"`, spec section 8)."""
        member.permits += permits

    def phase_eviction(self) -> None:
        """Phase 4: members disconnected for `evict_after` ticks are evicted, with the effects of leaving."""
        if self.config.evict_after == 0:
            return
        for member in list(self.members.values()):
            if not member.connected and member.disconnected_at + self.config.evict_after <= self.now:
                # req: KS-MEM-2
                self.emit("consumer_evicted", consumer=member.name)
                self.evicted_total += 1
                self.on_leave(member)


def _string_list(value: object, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise Refusal("invalid_argument", f"{name} must be a list of strings, got {value!r}")
    return list(value)


def _ranges(value: object) -> list[Range]:
    if value is None:
        return []
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise Refusal("invalid_argument", f"ranges must be a list of [lo, hi] pairs, got {value!r}")
    result: list[Range] = []
    for item in value:
        pair: Any = item
        if (
            not isinstance(pair, Sequence)
            or isinstance(pair, str)
            or len(pair) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
        ):
            raise Refusal("invalid_argument", f"ranges must be a list of [lo, hi] integer pairs, got {item!r}")
        result.append((pair[0], pair[1]))
    return result
