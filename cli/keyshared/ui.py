"""Terminal output shared by the commands: one console, tables, progress bars."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
