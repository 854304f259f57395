"""Naming and loading adapters: `reference`, `py:module:factory` (in-process) and `cmd:"..."` (stdio).

A `py:` adapter is imported by name at run time and its zero-argument factory called; the kit itself
never imports any implementation (the reference included) statically.
"""

from __future__ import annotations

import importlib
import shlex
import sys
from typing import Any

from ks_spec.errors import UserError

from ks_conformance.protocol import Connection, InProcessConnection, StartFailed
from ks_conformance.stdio import DEFAULT_TIMEOUT, StdioConnection

ALIASES = {"reference": "py:ks_reference.adapter:create", "spark": "py:ks_spark.dispatcher.adapter:create"}
"""Short names for adapters the kit knows."""


def resolve(adapter: str) -> str:
    """The full adapter string for an alias, or the string itself."""
    return ALIASES.get(adapter, adapter)


def check_adapter_name(adapter: str) -> str:
    """Raise a usage error (exit 64) unless `adapter` is an alias, `py:module:factory` or `cmd:...`."""
    full = resolve(adapter)
    if full.startswith("py:"):
        module, _, factory = full[3:].partition(":")
        if not module or not factory:
            raise UserError(f"--adapter {adapter}: expected py:module:factory", exit_code=64)
    elif full.startswith("cmd:"):
        if not full[4:].strip():
            raise UserError(f'--adapter {adapter}: expected cmd:"command to run"', exit_code=64)
    else:
        expected = "'reference', 'spark', py:module:factory or cmd:\"...\""
        raise UserError(f"--adapter {adapter}: expected {expected}", exit_code=64)
    return full


def load_object(adapter: str) -> Any:
    """Import a `py:module:factory` adapter and call its factory; StartFailed if that fails."""
    full = resolve(adapter)
    module_name, _, factory_name = full[3:].partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise StartFailed(
            "start-failed", f"{adapter}: cannot import {module_name}: {type(error).__name__}: {error}"
        ) from None
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise StartFailed("start-failed", f"{adapter}: {module_name} has no callable {factory_name}")
    try:
        return factory()
    except Exception as error:
        raise StartFailed(
            "start-failed", f"{adapter}: {factory_name}() failed: {type(error).__name__}: {error}"
        ) from None


def connect(adapter: str, validate: bool = False, timeout: float = DEFAULT_TIMEOUT) -> Connection:
    """A connection to the adapter, not yet started."""
    full = check_adapter_name(adapter)
    if full.startswith("py:"):
        return InProcessConnection(load_object(full), adapter, validate=validate)
    return StdioConnection(full[4:], adapter=adapter, timeout=timeout, validate=validate)


def stdio_command(adapter: str) -> str:
    """A `cmd:` adapter that serves an in-process adapter over stdio (this Python, `-m ks_conformance.serve`)."""
    full = check_adapter_name(adapter)
    if not full.startswith("py:"):
        raise UserError(f"--adapter {adapter}: only a py: adapter can be served over stdio", exit_code=64)
    return "cmd:" + shlex.join([sys.executable, "-m", "ks_conformance.serve", full])
