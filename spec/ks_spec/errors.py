"""Errors meant for users: one line, naming the problem and where it is.

Every part of the kit raises them; the command line turns each into its exit code (keyshared.exit_codes).
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake in user input (a file, an argument, a configuration) with a one-line message.

    The CLI prints the message as is and exits with the code of its kind, or with `exit_code` when the raiser
    named one; it never shows a traceback.
    """

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __str__(self) -> str:
        text = super().__str__()
        return text.splitlines()[0] if text else text


class MissingInput(UserError):
    """A file or folder that the user named does not exist or cannot be read."""


class Unavailable(UserError):
    """A required tool (Java, a jar) is missing from this machine."""


class JobFailed(UserError):
    """A distributed job (Spark) failed while running: out of memory, a lost executor, a dead JVM."""
