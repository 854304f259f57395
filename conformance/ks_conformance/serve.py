"""`python -m ks_conformance.serve py:module:factory`: serve an in-process adapter over stdio."""

from __future__ import annotations

import sys

from ks_conformance.adapters import check_adapter_name, load_object
from ks_conformance.protocol import StartFailed
from ks_conformance.stdio import serve_stdio


def main(argv: list[str] | None = None) -> int:
    """Load the adapter named on the command line and serve it until `stop`."""
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m ks_conformance.serve py:module:factory | reference", file=sys.stderr)
        return 64
    try:
        check_adapter_name(arguments[0])
        adapter = load_object(arguments[0])
    except (StartFailed, Exception) as error:
        print(f"ks_conformance.serve: {error}", file=sys.stderr)
        return 78
    return serve_stdio(adapter)


if __name__ == "__main__":
    sys.exit(main())
