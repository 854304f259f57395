"""Key filters as the spec defines them (KS-FLT-1), evaluated by the checker itself.

`*` matches any run of characters (including none), `?` exactly one character, every other character
(`[`, `]` and `\\` included) only itself; a pattern must match the whole key, case-sensitively. This is
deliberately not `fnmatch`, which treats `[...]` as a character class. The checker has its own matcher
so that it never agrees with an implementation by sharing its code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache


@cache
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The regular expression equivalent to one glob pattern."""
    # req: KS-FLT-1
    parts = [".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern]
    return re.compile("".join(parts), re.DOTALL)


def matches(pattern: str, key: str) -> bool:
    """True if the glob pattern matches the whole key."""
    return compile_pattern(pattern).fullmatch(key) is not None


def accepts(filters: Sequence[str], key: str) -> bool:
    """True if a consumer with these filters accepts the key: no filters, or at least one matches."""
    return not filters or any(matches(pattern, key) for pattern in filters)
