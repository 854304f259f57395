"""spec/checking.md's anomaly tables (section 2.1 to 2.4), rendered from the rule registry.

`keyshared spec index` writes them into checking.md; tests/test_checker_catalogue.py fails when the document
and the registry differ, naming the first differing row.
"""

from __future__ import annotations

import re

from ks_conformance.rules import RULES, Rule, Stage

SECTIONS: dict[str, Stage] = {"2.1": Stage.EVENT, "2.2": Stage.OP, "2.3": Stage.QUIESCENT, "2.4": Stage.HARNESS}
TRACE_HEADER = "| anomaly | requirement | scope | when a checker reports it | witness | exercised when |"
HARNESS_HEADER = "| anomaly | requirement | scope | when the harness reports it |"


def _cell(text: str) -> str:
    """A table cell: a `|` in the text would end the cell."""
    return text.replace("|", "\\|")


def row(rule: Rule) -> str:
    """The rule's row in its stage's table."""
    cells = [f"`{rule.name}`", rule.requirement, rule.scope.value, _cell(rule.condition)]
    if rule.stage is not Stage.HARNESS:
        cells += [_cell(rule.witness), _cell(rule.exercised)]
    return "| " + " | ".join(cells) + " |"


def table(stage: Stage) -> list[str]:
    """The whole table of one stage: header, separator and one row per rule, in registry order."""
    header = HARNESS_HEADER if stage is Stage.HARNESS else TRACE_HEADER
    separator = "|" + "---|" * header.count(" | ") + "---|"
    return [header, separator, *(row(r) for r in RULES if r.stage is stage)]


def render(document: str) -> str:
    """checking.md with the table under each of the headings 2.1 to 2.4 replaced by the registry's."""
    lines = document.split("\n")
    result: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        result.append(line)
        index += 1
        heading = re.match(r"^### (2\.\d) ", line)
        if not heading or heading.group(1) not in SECTIONS:
            continue
        while index < len(lines) and not lines[index].startswith("|"):
            result.append(lines[index])
            index += 1
        while index < len(lines) and lines[index].startswith("|"):
            index += 1
        result.extend(table(SECTIONS[heading.group(1)]))
    return "\n".join(result)
