"""`keyshared hash`: the raw hash values Pulsar and Danube compute for keys."""

from __future__ import annotations

import argparse
import json
from typing import Any

from keyshared.ui import console, table

ALGOS = ("murmur3", "pulsar", "danube")


def register(commands: Any) -> None:
    """Add `hash`."""
    parser = commands.add_parser(
        "hash",
        help="print the raw hash values of keys (murmur3, Pulsar's slots, Danube's ring hash)",
        description=(
            "Print each key's raw hash: murmur3 is MurmurHash3 x86 32-bit, seed 0, unsigned; pulsar adds "
            "Pulsar's masked value and its two slots (consistent hashing [1, 65535]; auto-split and sticky "
            "[0, 65535]); danube is FNV-1a 64 folded to 32 bits and finished with fmix32."
        ),
    )
    parser.add_argument(
        "--algo", choices=ALGOS, action="append", help="which values to print (repeatable; default all)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per key instead of a table")
    parser.add_argument("keys", nargs="+", metavar="KEY", help="routing keys (UTF-8)")
    parser.set_defaults(handler=run_hash)


def run_hash(args: argparse.Namespace) -> int:
    """Print a table (or JSON lines) of the requested hash values."""
    from ks_reference.hashing import (
        danube_hash,
        murmur3_32,
        pulsar_consistent_slot_of_hash,
        pulsar_range_slot_of_hash,
    )
    from ks_spec.errors import UserError

    algos = args.algo or list(ALGOS)
    rows: list[dict[str, Any]] = []
    for key in args.keys:
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"key {key!r} is not valid UTF-8") from None
        row: dict[str, Any] = {"key": key}
        value = murmur3_32(key)
        if "murmur3" in algos:
            row["murmur3"] = value
        if "pulsar" in algos:
            row["pulsar_masked"] = value & 0x7FFFFFFF
            row["pulsar_consistent_slot"] = pulsar_consistent_slot_of_hash(value)
            row["pulsar_range_slot"] = pulsar_range_slot_of_hash(value)
        if "danube" in algos:
            row["danube"] = danube_hash(key)
        rows.append(row)
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return 0
    body = [(row["key"], name, value) for row in rows for name, value in row.items() if name != "key"]
    console.print(table("hash values", ("key", "function", "value"), body))
    return 0
