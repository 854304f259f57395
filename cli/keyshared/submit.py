"""Entry point for spark-submit: `spark-submit [spark options] .../keyshared/submit.py validate-replay TRACE...`.

spark-submit runs a Python file, not a console script; this file hands its arguments to the
`keyshared` command line, which then joins the session spark-submit created (its master, its
executors) instead of starting an embedded one.
"""

from __future__ import annotations

import sys

from keyshared.cli import main as keyshared_main


def main() -> int:
    """Run `keyshared` with this process's arguments."""
    return keyshared_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
