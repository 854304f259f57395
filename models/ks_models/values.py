"""TLC's value syntax: parse the values TLC prints (states, PrintT output) and print them back.

TLC 2.15 has no JSON output, so counterexamples and trace-validation verdicts arrive as text:
integers, strings, booleans, model values, sets `{...}`, sequences `<<...>>`, records
`[f |-> v]`, functions `(k :> v @@ ...)` and intervals `a..b`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ks_spec.errors import UserError


class ModelValue(str):
    """A TLC model value (printed bare, e.g. `NoOne` or `c1`), distinct from a string."""

    def __repr__(self) -> str:
        return f"ModelValue({str(self)!r})"


class TlaSet(tuple[Any, ...]):
    """A set, in the order TLC printed it (TLC prints sets sorted)."""


class TlaSeq(tuple[Any, ...]):
    """A sequence (a function with domain 1..n)."""


class TlaFunction(dict[Any, Any]):
    """A function `(k :> v @@ ...)`; hashable so it can sit in sets and keys."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))


class TlaRecord(dict[str, Any]):
    """A record `[field |-> value, ...]`."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))


_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<number>-?\d+)
      | (?P<symbol><<|>>|\|->|:>|@@|\.\.|[{}\[\]()<>,])
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", '"': '"', "\\": "\\"}


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN_RE.match(text, position)
        if match is None or match.end() == position:
            raise UserError(f"TLC value: unexpected text at column {position + 1}: {text[position : position + 20]!r}")
        position = match.end()
        kind = match.lastgroup
        assert kind is not None
        yield kind, match.group(kind)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.items = list(_tokens(text))
        self.index = 0

    def peek(self) -> tuple[str, str] | None:
        return self.items[self.index] if self.index < len(self.items) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise UserError(f"TLC value: unexpected end of {self.text[:60]!r}")
        self.index += 1
        return token

    def expect(self, symbol: str) -> None:
        _, value = self.take()
        if value != symbol:
            raise UserError(f"TLC value: expected {symbol!r}, got {value!r} in {self.text[:60]!r}")

    def at(self, symbol: str) -> bool:
        token = self.peek()
        return token is not None and token[1] == symbol and token[0] == "symbol"

    def value(self) -> Any:
        first = self.atom()
        if self.at(".."):
            self.take()
            last = self.atom()
            return TlaSet(range(first, last + 1))
        return first

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "number":
            return int(text)
        if kind == "string":
            return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text[1:-1])
        if kind == "name":
            if text == "TRUE":
                return True
            if text == "FALSE":
                return False
            return ModelValue(text)
        if text == "{":
            return TlaSet(self.sequence_until("}"))
        if text == "<<":
            return TlaSeq(self.sequence_until(">>"))
        if text == "[":
            return self.record()
        if text == "(":
            return self.function()
        raise UserError(f"TLC value: unexpected {text!r} in {self.text[:60]!r}")

    def sequence_until(self, closing: str) -> list[Any]:
        elements: list[Any] = []
        if self.at(closing):
            self.take()
            return elements
        while True:
            elements.append(self.value())
            if self.at(","):
                self.take()
                continue
            self.expect(closing)
            return elements

    def record(self) -> TlaRecord:
        fields = TlaRecord()
        if self.at("]"):
            self.take()
            return fields
        while True:
            kind, name = self.take()
            if kind != "name":
                raise UserError(f"TLC value: expected a field name, got {name!r}")
            self.expect("|->")
            fields[name] = self.value()
            if self.at(","):
                self.take()
                continue
            self.expect("]")
            return fields

    def function(self) -> Any:
        mapping = TlaFunction()
        while True:
            key = self.value()
            if not self.at(":>"):  # a parenthesised value, not a function
                self.expect(")")
                return key
            self.take()
            mapping[key] = self.value()
            if self.at("@@"):
                self.take()
                continue
            self.expect(")")
            return mapping


def parse_value(text: str) -> Any:
    """Parse one TLC value; raise UserError when the text is not one."""
    parser = _Parser(text)
    result = parser.value()
    if parser.peek() is not None:
        raise UserError(f"TLC value: trailing text after the value in {text[:60]!r}")
    return result


def format_value(value: Any) -> str:
    """Print a parsed value back in TLC's syntax, on one line."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, ModelValue):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, TlaSet):
        return "{" + ", ".join(format_value(v) for v in value) + "}"
    if isinstance(value, TlaSeq):
        return "<<" + ", ".join(format_value(v) for v in value) + ">>"
    if isinstance(value, TlaRecord):
        return "[" + ", ".join(f"{k} |-> {format_value(v)}" for k, v in value.items()) + "]"
    if isinstance(value, TlaFunction):
        if not value:
            return "<<>>"
        return "(" + " @@ ".join(f"{format_value(k)} :> {format_value(v)}" for k, v in value.items()) + ")"
    return str(value)
