"""Which parameters of a parametrized test this pytest session selected (so a module fixture does only that work)."""

from __future__ import annotations

from typing import Any

import pytest


def selected_names(request: pytest.FixtureRequest, param: str, kind: type[Any]) -> list[str]:
    """The sorted `.name`s of every `param` value of type `kind` among the selected test items of the
    requesting module."""
    return sorted(
        {
            item.callspec.params[param].name
            for item in request.session.items
            if isinstance(item, pytest.Function)
            and item.module is request.module  # another module's `mutant` parameters are not this fixture's work
            and hasattr(item, "callspec")
            and isinstance(item.callspec.params.get(param), kind)
        }
    )
