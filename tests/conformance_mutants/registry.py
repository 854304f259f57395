"""What a mutant is, and `@mutant(...)`, which registers one beside its broken class in bugs.py.

Kept apart from the package's `__init__` so that bugs.py can import it without an import cycle: `__init__`
imports bugs.py, whose decorators fill `REGISTERED` in the order of its classes, and publishes that as `MUTANTS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ks_reference.adapter import CAPABILITIES, ReferenceAdapter
from ks_reference.dispatcher import Dispatcher

from conformance_mutants.slices import WITHOUT_ZOMBIES


@dataclass(frozen=True)
class Mutant:
    """One broken dispatcher: what is wrong, what the suite must report, and what it is run with."""

    name: str
    bug: str
    """The bug in one sentence, as a broker team would describe it."""
    catches: frozenset[str]
    """The requirement IDs the suite must report failed."""
    dispatcher: type[Dispatcher] = Dispatcher
    adapter: type[ReferenceAdapter] = ReferenceAdapter
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of the reference's capabilities: the slice of the configuration space searched."""
    warns: frozenset[str] = frozenset()
    """SHOULD requirements the suite must report as warnings."""
    may: frozenset[str] = frozenset()
    """Requirements the suite may also report failed: what the bug breaks only in some of its examples."""

    def create(self) -> ReferenceAdapter:
        """The adapter object the kit connects to in process."""
        mutant = self

        class MutantAdapter(mutant.adapter):  # type: ignore[name-defined,misc]
            dispatcher_class = mutant.dispatcher

            def start(self) -> dict[str, Any]:
                info: dict[str, Any] = super().start()
                info["implementation"] = {**info["implementation"], "name": f"mutant-{mutant.name}"}
                info["capabilities"] = {**CAPABILITIES, **WITHOUT_ZOMBIES, **mutant.capabilities}
                return info

        return MutantAdapter(durable=False)


def describe(
    name: str,
    catches: str,
    dispatcher: type[Dispatcher],
    warns: str = "",
    adapter: type[ReferenceAdapter] = ReferenceAdapter,
    may: str = "",
    **capabilities: Any,
) -> Mutant:
    """A mutant described by the first docstring line of its broken class (the adapter, when that is broken)."""
    broken = dispatcher if adapter is ReferenceAdapter else adapter
    return Mutant(
        name,
        (broken.__doc__ or "").strip().splitlines()[0],
        frozenset(catches.split()),
        dispatcher,
        adapter,
        capabilities=capabilities,
        warns=frozenset(warns.split()),
        may=frozenset(may.split()),
    )


REGISTERED: list[Mutant] = []
"""The mutants `@mutant(...)` registered, in registration order (the order of bugs.py's classes): `MUTANTS`."""

Broken = TypeVar("Broken", bound=type)


def mutant(
    name: str,
    catches: str,
    *,
    warns: str = "",
    may: str = "",
    dispatcher: type[Dispatcher] | None = None,
    adapter: type[ReferenceAdapter] | None = None,
    **capabilities: Any,
) -> Callable[[Broken], Broken]:
    """Register the decorated broken class as the mutant `name`, caught on `catches` (IDs separated by spaces).

    A broken dispatcher runs under the reference adapter (or `adapter=`); a broken adapter runs the reference
    dispatcher (or `dispatcher=`). Every other keyword is a capability of the mutant's slice.
    """

    def register(broken: Broken) -> Broken:
        if any(known.name == name for known in REGISTERED):
            raise ValueError(f"mutant {name} is registered twice")
        if issubclass(broken, ReferenceAdapter) and adapter is None:
            found = describe(name, catches, dispatcher or Dispatcher, warns, broken, may, **capabilities)
        elif issubclass(broken, Dispatcher) and dispatcher is None:
            found = describe(name, catches, broken, warns, adapter or ReferenceAdapter, may, **capabilities)
        else:
            raise TypeError(f"mutant {name}: decorate the broken Dispatcher or adapter, and name only the other")
        REGISTERED.append(found)
        return broken

    return register
