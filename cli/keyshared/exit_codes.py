"""The exit codes of every `keyshared` command (sysexits where one fits), and the code of each user error.

The error types live with the code that raises them (`ks_spec.errors`, shared by every part of the kit); which
number a mistake exits with is the command line's contract, so it is decided here. README.md's exit code
table is this table (tests/test_cli_exit_codes.py holds them equal).
"""

from __future__ import annotations

from ks_spec.errors import JobFailed, MissingInput, Unavailable, UserError

OK = 0
FAILED = 1
UNKNOWN = 2
USAGE = 64  # EX_USAGE
DATA = 65  # EX_DATAERR
NO_INPUT = 66  # EX_NOINPUT
UNAVAILABLE = 69  # EX_UNAVAILABLE
SOFTWARE = 70  # EX_SOFTWARE
CONFIG = 78  # EX_CONFIG
INTERRUPTED = 130

EXIT_CODES: dict[int, str] = {
    OK: "success: the checks passed, the trace is valid, the dispatcher conformant",
    FAILED: "a check failed: not conformant, an invalid trace, a failed vector, a model result unlike the manifest's",
    UNKNOWN: "no verdict: a trace that cannot be judged, an adapter that crashed or hung, a MUST left vacuous",
    USAGE: "usage error: a bad option or argument (an unknown requirement ID, a malformed --master)",
    DATA: "malformed input: a trace, a workload, a scenario or vector file, a configuration",
    NO_INPUT: "a file or folder named on the command line does not exist",
    UNAVAILABLE: "a required tool is missing (Java 17+) or Spark cannot start (an unreachable master)",
    SOFTWARE: "a Spark job failed: out of memory, a lost executor",
    CONFIG: "conformance: the adapter failed to start or speaks another protocol version",
    INTERRUPTED: "interrupted (Ctrl-C)",
}
"""Every exit code and what it means, in the order of README.md's table."""


def of_error(error: UserError) -> int:
    """The exit code of a user error: the one its raiser named, else the one of its kind."""
    if error.exit_code is not None:
        return error.exit_code
    if isinstance(error, MissingInput):
        return NO_INPUT
    if isinstance(error, Unavailable):
        return UNAVAILABLE
    if isinstance(error, JobFailed):
        return SOFTWARE
    return DATA
