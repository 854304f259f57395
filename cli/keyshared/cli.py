"""The `keyshared` command: one entry point, a subcommand per task, `--help` on each."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from ks_spec.errors import UserError

from keyshared import __version__

EX_USAGE = 64

# Each module defines register(subparsers); handlers import heavy dependencies lazily.
COMMAND_MODULES = (
    "keyshared.cmd_verify",
    "keyshared.cmd_spec",
    "keyshared.cmd_trace",
)


class Parser(argparse.ArgumentParser):
    """argparse with the sysexits usage code (64) and a one-line error."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EX_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every registered subcommand."""
    parser = Parser(
        prog="keyshared",
        description="Key-Shared dispatch: the specification, its reference, models and conformance kit.",
    )
    parser.add_argument("--version", action="version", version=f"keyshared {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; user mistakes become one line on stderr and a non-zero exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except UserError as error:
        print(f"keyshared: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("keyshared: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
