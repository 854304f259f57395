"""Terminal output shared by the commands: one console, tables, progress bars."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console(highlight=False)
error_console = Console(stderr=True, highlight=False)


def table(title: str, headers: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """A simple rich table with the given headers."""
    result = Table(title=title, title_justify="left")
    for header in headers:
        result.add_column(header)
    for row in rows:
        result.add_row(*(str(cell) for cell in row))
    return result


def progress() -> Progress:
    """A progress bar that disappears when done and stays quiet when output is not a terminal."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=error_console,
        transient=True,
        disable=not error_console.is_terminal,
    )


def argument_type(check: Callable[[str], str]) -> Callable[[str], str]:
    """An argparse `type=` from a checker that raises UserError, so argparse reports its one-line message."""
    from ks_spec.errors import UserError

    def parse(text: str) -> str:
        try:
            return check(text)
        except UserError as error:
            raise argparse.ArgumentTypeError(str(error).split(": ", 1)[-1]) from None

    parse.__name__ = check.__name__.removeprefix("check_")
    return parse
