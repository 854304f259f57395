"""Counterexamples as readable steps: the action taken, then only what it changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ks_models.tlc import TlcOutcome, TraceState
from ks_models.values import TlaFunction, TlaRecord, format_value

# Bookkeeping variables that say nothing about the system (budgets of the environment, ghosts).
QUIET_VARIABLES = frozenset({"spent", "tickParity"})


@dataclass(frozen=True)
class Step:
    """One row of a counterexample: state number, action, and the changes it made."""

    number: int
    action: str
    changes: tuple[str, ...]


def _key_text(key: Any) -> str:
    return str(key) if isinstance(key, str) else format_value(key)


def diff_value(name: str, before: Any, after: Any, depth: int = 2) -> list[str]:
    """'name[k]: old -> new' for each entry that changed; the whole value when it is not a map."""
    if before == after:
        return []
    if depth > 0 and isinstance(before, TlaFunction | TlaRecord) and isinstance(after, TlaFunction | TlaRecord):
        if before.keys() == after.keys():
            changes: list[str] = []
            for key in after:
                label = f"{name}.{key}" if isinstance(after, TlaRecord) else f"{name}[{_key_text(key)}]"
                changes += diff_value(label, before[key], after[key], depth - 1)
            return changes
    return [f"{name}: {format_value(before)} -> {format_value(after)}"]


def steps(states: list[TraceState]) -> list[Step]:
    """The counterexample as steps; the first lists the initial value of every variable."""
    rows: list[Step] = []
    previous: dict[str, Any] | None = None
    for state in states:
        if previous is None:
            changes = [f"{name} = {format_value(value)}" for name, value in sorted(state.variables.items())]
        else:
            changes = []
            for name in sorted(state.variables):
                if name in QUIET_VARIABLES:
                    continue
                changes += diff_value(name, previous.get(name), state.variables[name])
        rows.append(Step(state.number, state.action, tuple(changes) or ("(nothing changed)",)))
        previous = state.variables
    return rows


def ending(outcome: TlcOutcome) -> str | None:
    """How a liveness counterexample ends: stuttering for ever, or a loop back to a state."""
    if outcome.stuttering:
        return "then stutters for ever (nothing else ever happens)"
    if outcome.loops_back_to is not None:
        return f"then loops back to state {outcome.loops_back_to}"
    return None
