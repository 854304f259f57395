"""A conformance run decided by its seed alone, whatever else the process has imported.

Since 6.131, Hypothesis mixes into its draws the literals of every *local* module loaded in the process
(`hypothesis.internal.conjecture.providers`: about one draw in twenty picks such a constant). Which
modules count as local depends on what the process imported (the CLI, a pytest session, an in-process
adapter), on whether keyshared is an editable install, and on every edit of their source: the same seed
then searched differently and found different anomaly kinds. There is no setting for it, so the kit
empties that pool for the length of its own rounds and restores it after. Hypothesis's own constants (0,
1, boundaries, ...) still take part. The pinned Hypothesis version (pyproject.toml) is the one this was
read against; tests/test_conformance_kit.py proves the effect, so an upgrade that moves it fails there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def seed_decides() -> Iterator[None]:
    """Within the block, Hypothesis draws no constants taken from the source of loaded modules."""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    collect = providers._get_local_constants
    providers.CONSTANTS_CACHE.cache.clear()  # entries built from the process's pool before the block
    providers._get_local_constants = Constants  # a fresh, empty pool on every call
    try:
        yield
    finally:
        providers._get_local_constants = collect
        providers.CONSTANTS_CACHE.cache.clear()  # entries built from the empty pool
