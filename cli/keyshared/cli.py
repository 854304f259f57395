"""The `keyshared` command: one entry point, a subcommand per task, `--help` on each."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ks_spec.errors import UserError

from keyshared import __version__, exit_codes

# Every module keyshared/cmd_*.py defines register(subparsers); they are found, not listed, so that
# each part of the kit adds its commands in its own file. Handlers import heavy dependencies lazily.
PACKAGE_DIR = Path(__file__).resolve().parent
FIRST_COMMANDS = ("cmd_verify",)


def command_modules() -> list[str]:
    """The command modules, `verify` first, then by name."""
    names = sorted(p.stem for p in PACKAGE_DIR.glob("cmd_*.py"))
    ordered = [n for n in FIRST_COMMANDS if n in names] + [n for n in names if n not in FIRST_COMMANDS]
    return [f"keyshared.{name}" for name in ordered]


class Parser(argparse.ArgumentParser):
    """argparse with the sysexits usage code (64) and a one-line error."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(exit_codes.USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every registered subcommand."""
    parser = Parser(
        prog="keyshared",
        description="Key-Shared dispatch: the specification, its reference, models and conformance kit.",
    )
    parser.add_argument("--version", action="version", version=f"keyshared {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    for module_name in command_modules():
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
        return exit_codes.of_error(error)
    except KeyboardInterrupt:
        print("keyshared: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
