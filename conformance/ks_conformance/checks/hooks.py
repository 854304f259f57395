"""Where a rule's check joins the checker without an edit to the event handlers: a rule module registers its check
at a point (`at_event(kind)`, `at_delivery`, `at_end_of_op`, `at_quiescence`) and it runs there (at a delivery,
an op's end or a quiescent point after the checks the handlers call by name). This is how a new rule's check
stays in its rule's module (CONTRIBUTING.md, "Adding a requirement").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ks_conformance.checks.records import Message, OpState
    from ks_conformance.checks.state import CheckerState

    DeliveryCheck = Callable[[CheckerState, Message, dict[str, Any]], None]
    OpCheck = Callable[[CheckerState, OpState], None]
    QuiescenceCheck = Callable[[CheckerState, dict[str, Any]], None]
    EventCheck = Callable[[CheckerState, dict[str, Any]], None]

EVENT_CHECKS: dict[str, list[EventCheck]] = {}
"""Per event kind, run as each such event arrives, before its handler updates the state (what the dispatcher saw)."""

DELIVERY_CHECKS: list[DeliveryCheck] = []
"""Run at every `deliver` event, before the delivery is recorded: the state is the one the dispatcher chose in."""
END_OF_OP_CHECKS: list[OpCheck] = []
"""Run when an op closes, after its phases and the end-of-op checks, before settled state is archived."""
QUIESCENCE_CHECKS: list[QuiescenceCheck] = []
"""Run at a `quiescent` event, after the liveness checks."""


def at_event(kind: str) -> Callable[[EventCheck], EventCheck]:
    """Register a check of every event of one kind: `check(st, event)`, before the event's handler."""

    def register(check: EventCheck) -> EventCheck:
        EVENT_CHECKS.setdefault(kind, []).append(check)
        return check

    return register


def at_delivery(check: DeliveryCheck) -> DeliveryCheck:
    """Register a check of every delivery: `check(st, message, event)`."""
    DELIVERY_CHECKS.append(check)
    return check


def at_end_of_op(check: OpCheck) -> OpCheck:
    """Register a check of every op's end: `check(st, op)`."""
    END_OF_OP_CHECKS.append(check)
    return check


def at_quiescence(check: QuiescenceCheck) -> QuiescenceCheck:
    """Register a check of every quiescent point: `check(st, event)`."""
    QUIESCENCE_CHECKS.append(check)
    return check
