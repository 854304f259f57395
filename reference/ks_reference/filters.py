"""Key filters (spec section 5): glob patterns where only `*` and `?` are special.

`fnmatch` is not used on purpose: it treats `[...]` as a character class (KS-FLT-1), and a
regular-expression translation backtracks badly on patterns with many `*`. The two-pointer
matcher below runs in O(len(pattern) * len(key)) at worst.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def glob_match(pattern: str, key: str) -> bool:
    """True when `pattern` matches the whole `key`: `*` any run (even empty), `?` one character (KS-FLT-1).

    post: __return__ == (re.fullmatch(_glob_regex(pattern), key, re.DOTALL) is not None)
    post: ("*" in pattern or "?" in pattern) or __return__ == (pattern == key)
    """
    # req: KS-FLT-1
    p = k = 0
    star_p = -1  # position in the pattern just after the last `*` seen
    star_k = 0  # position in the key that `*` is currently stretched to
    while k < len(key):
        if p < len(pattern) and pattern[p] == "*":
            star_p, star_k = p + 1, k
            p += 1
        elif p < len(pattern) and (pattern[p] == "?" or pattern[p] == key[k]):
            p += 1
            k += 1
        elif star_p >= 0:
            star_k += 1  # let the last `*` swallow one more character and retry from there
            p, k = star_p, star_k
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def _glob_regex(pattern: str) -> str:
    """The regular expression equivalent to a glob, used only as the contract's oracle."""
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)


def accepts(filters: Sequence[str], key: str) -> bool:
    """A consumer accepts a key when it has no filters or one of them matches (spec section 5)."""
    return not filters or any(glob_match(pattern, key) for pattern in filters)
