"""Errors meant for users: one line, naming the problem and where it is."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in user input (a file, an argument, a configuration) with a one-line message.

    The CLI prints the message as is and exits with `exit_code`; it never shows a traceback.
    """

    exit_code: int = 65  # EX_DATAERR: the input was malformed

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        text = super().__str__()
        return text.splitlines()[0] if text else text


class MissingInput(UserError):
    """A file or folder that the user named does not exist or cannot be read."""

    exit_code = 66  # EX_NOINPUT


class Unavailable(UserError):
    """A required tool (Java, a jar) is missing from this machine."""

    exit_code = 69  # EX_UNAVAILABLE


class JobFailed(UserError):
    """A distributed job (Spark) failed while running: out of memory, a lost executor, a dead JVM."""

    exit_code = 70  # EX_SOFTWARE
