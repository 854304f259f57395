"""`keyshared route`: which consumer each key goes to under a selector, as Pulsar or Danube would route it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from keyshared.ui import console, table

SELECTOR_NAMES = ("ring", "pulsar-consistent", "pulsar-auto-split", "pulsar-sticky", "danube", "buckets", "partitions")


def register(commands: Any) -> None:
    """Add `route`."""
    parser = commands.add_parser(
        "route",
        help="predict which consumer each key goes to under a selector (ring, Pulsar's, Danube's, buckets)",
        description=(
            "For each key, print its hash or slot and the consumer the selector picks, given the consumers "
            "in join order. pulsar-sticky consumers declare ranges as NAME=LO-HI[+LO-HI...]. "
            "pulsar-consistent accepts repeated names (each gets Pulsar's next free name index)."
        ),
    )
    parser.add_argument("--selector", choices=SELECTOR_NAMES, default="ring", help="the selector (default: ring)")
    parser.add_argument(
        "--consumers",
        required=True,
        metavar="A,B,C",
        help="consumer names in join order, comma-separated (pulsar-sticky: a=0-32767,b=32768-65535)",
    )
    parser.add_argument(
        "--points",
        type=int,
        default=None,
        metavar="N",
        help="points per consumer (ring, pulsar-consistent; default 100)",
    )
    parser.add_argument(
        "--buckets", type=int, default=4, metavar="N", help="bucket count of segment 0 (buckets; default 4)"
    )
    parser.add_argument("--ranges", action="store_true", help="also print each consumer's share as inclusive ranges")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("keys", nargs="*", metavar="KEY", help="routing keys to route")
    parser.set_defaults(handler=run_route)


def _parse_consumers(text: str, selector: str) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """(member id, consumer name, declared ranges) per consumer, in join order."""
    from ks_spec.errors import UserError

    members: list[tuple[str, str, list[tuple[int, int]]]] = []
    items = [item.strip() for item in text.split(",")]
    names = [item.partition("=")[0] for item in items]
    seen: dict[str, int] = {}
    for item, name in zip(items, names, strict=True):
        if not name:
            raise UserError(f"--consumers: empty consumer name in {text!r}")
        spec = item.partition("=")[2]
        ranges: list[tuple[int, int]] = []
        if selector == "pulsar-sticky":
            if not spec:
                raise UserError(f"--consumers: pulsar-sticky consumer {name!r} needs ranges, e.g. {name}=0-32767")
            for part in spec.split("+"):
                lo, dash, hi = part.partition("-")
                if not dash or not lo.strip().isdigit() or not hi.strip().isdigit():
                    raise UserError(f"--consumers: {name}: range {part!r} is not LO-HI")
                ranges.append((int(lo), int(hi)))
        elif spec:
            raise UserError(f"--consumers: {item!r}: only pulsar-sticky consumers declare ranges")
        repeated = names.count(name) > 1
        if repeated and selector != "pulsar-consistent":
            raise UserError(f"--consumers: {name!r} appears twice; only pulsar-consistent allows repeated names")
        index = seen.get(name, 0)
        seen[name] = index + 1
        members.append((f"{name}[{index}]" if repeated else name, name, ranges))
    return members


def run_route(args: argparse.Namespace) -> int:
    """Build the selector from the consumers, then route every key."""
    from ks_reference.hashing import murmur3_32, split_hash
    from ks_reference.selectors import (
        BucketsSelector,
        PulsarConsistentSelector,
        Selector,
        SelectorRefusal,
        make_selector,
    )
    from ks_spec.errors import UserError

    if args.points is not None and args.selector not in ("ring", "pulsar-consistent"):
        raise UserError(f"--points: selector '{args.selector}' places no configurable points")
    if args.points is not None and args.points < 1:
        raise UserError(f"--points must be >= 1, got {args.points}")
    if not 1 <= args.buckets <= 65536:
        raise UserError(f"--buckets must be between 1 and 65536, got {args.buckets}")
    if not args.keys and not args.ranges:
        raise UserError("give at least one KEY, or --ranges")
    members = _parse_consumers(args.consumers, args.selector)
    points = args.points or 100
    selector: Selector
    if args.selector == "pulsar-consistent":
        selector = PulsarConsistentSelector(points, names={member: name for member, name, _ in members})
    elif args.selector == "buckets":
        selector = BucketsSelector(args.buckets)
    else:
        selector = make_selector(args.selector, points)
    for member, _, ranges in members:
        try:
            selector.add(member, ranges)
        except SelectorRefusal as refusal:
            raise UserError(f"--consumers: {member}: {refusal}") from None
    rows: list[dict[str, Any]] = []
    for key in args.keys:
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"key {key!r} is not valid UTF-8") from None
        row: dict[str, Any] = {"key": key}
        if args.selector == "buckets":
            hash32 = murmur3_32(key)
            high, low = split_hash(hash32)
            row.update(hash=hash32, segment=0, bucket=low * args.buckets // 65536)
        elif args.selector in ("ring", "danube"):
            row["hash"] = selector.position(key)
        else:
            row.update(murmur3=murmur3_32(key), slot=selector.position(key))
        row["consumer"] = selector.target(key)
        rows.append(row)
    ranges_by_member = selector.ranges() if args.ranges else {}
    if args.json:
        print(json.dumps({"selector": args.selector, "routes": rows, "ranges": ranges_by_member}, ensure_ascii=False))
        return 0
    if rows:
        headers = list(rows[0])
        body = [[row[h] if row[h] is not None else "(none)" for h in headers] for row in rows]
        console.print(table(f"routes ({args.selector})", headers, body))
    if args.ranges:
        low, high = selector.space
        size = high - low + 1
        share_rows = []
        for member, _, _ in members:
            owned = ranges_by_member.get(member, [])
            count = sum(hi - lo + 1 for lo, hi in owned)
            shown = ", ".join(f"[{lo}, {hi}]" for lo, hi in owned) or "(none)"
            share_rows.append((member, f"{100 * count / size:.2f}%", shown))
        console.print(table(f"ranges over [{low}, {high}]", ("consumer", "share", "ranges"), share_rows))
    return 0
