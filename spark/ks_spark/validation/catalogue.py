"""The anomaly kinds the Spark validator judges: every kind of spec/checking.md judged from a trace, read from the
rule registry (ks_conformance.rules), and which of them apply to a trace, asked of the Python checker itself, so
Spark's notion of what applies can never drift from check-trace's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ks_conformance.checker import Checker


def trace_kinds() -> tuple[str, ...]:
    """Every anomaly kind judged from a trace (spec/checking.md 2.1-2.3), in catalogue order."""
    from ks_conformance.rules import RULES, Stage

    return tuple(rule.name for rule in RULES if rule.stage is not Stage.HARNESS)


def _checker(config: Mapping[str, Any]) -> Checker:
    """A Python checker fed only the trace's `config` event: what it then applies is check-trace's rule."""
    from ks_conformance.checker import Checker

    checker = Checker()
    checker.feed({"seq": 0, "tick": 0, "event": "config", "detail": json.dumps({"config": dict(config)})})
    return checker


def applicable(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The trace kinds the Python checker judges under this configuration, in catalogue order."""
    checker = _checker(config)
    return tuple(name for name in trace_kinds() if checker.applies(name))


def listing() -> list[tuple[str, str, str]]:
    """(anomaly, requirement, the situation its rule judges: a key, a consumer or the subscription) for every trace
    kind, for --list-checks."""
    from ks_conformance.rules import rule

    return [(name, rule(name).requirement, rule(name).scope.value) for name in trace_kinds()]
