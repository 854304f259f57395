"""Requirements of spec/key-shared.md as data, and the checks that keep the spec honest.

The spec's Markdown is the source; `requirements.json` is generated from it and must stay
fresh. Every `KS-...` ID cited anywhere in the repository must name a live requirement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from ks_spec import paths
from ks_spec.errors import MissingInput, UserError

AREAS: dict[str, str] = {
    "GEN": "entities, logical time, operations, refusals, order of effects",
    "ASN": "assignment of keys to consumers and the selectors",
    "FLT": "key filters",
    "ORD": "per-key ordering, both ordering profiles",
    "DRN": "draining on reassignment",
    "FLW": "flow control: capacity, window, held messages",
    "ACK": "acknowledgements",
    "RTY": "nacks, ack timeouts, retry back-off, redelivery counts",
    "POI": "poison policies and operator actions",
    "MEM": "consumers joining, leaving, disconnecting, evicted",
    "RES": "resolutions",
    "CUR": "the cursor, persistence, restart, ack holes",
    "ISO": "isolation and the look-ahead bound",
    "OBS": "observability",
    "BKT": "buckets and segments (PIP-486)",
    "BEF": "the best-effort variant",
    "LIV": "liveness at quiescence",
    "CFG": "configuration",
}
PROFILES = ("strict", "owner", "best-effort")
KINDS = ("safety", "liveness", "definition", "observability")
LEVELS = ("MUST", "SHOULD", "MAY")

# Longest alternatives first so that "MUST NOT" is one keyword, not "MUST".
KEYWORD_RE = re.compile(
    r"\b(MUST NOT|MUST|SHALL NOT|SHALL|REQUIRED|SHOULD NOT|SHOULD|NOT RECOMMENDED|RECOMMENDED|MAY|OPTIONAL)\b"
)
KEYWORD_LEVEL = {
    "MUST": "MUST",
    "MUST NOT": "MUST",
    "SHALL": "MUST",
    "SHALL NOT": "MUST",
    "REQUIRED": "MUST",
    "SHOULD": "SHOULD",
    "SHOULD NOT": "SHOULD",
    "RECOMMENDED": "SHOULD",
    "NOT RECOMMENDED": "SHOULD",
    "MAY": "MAY",
    "OPTIONAL": "MAY",
}
ID_RE = re.compile(r"^KS-([A-Z]{2,4})-([1-9][0-9]*)$")
# A citation in any file: KS-ORD-1 in prose and comments, KS_ORD_1 in identifiers.
CITATION_RE = re.compile(r"\bKS[-_]([A-Z]{2,4})[-_]([0-9]+)(?![0-9])")
HEADING_RE = re.compile(r"^#### (?P<id>KS-[A-Z]+-\d+): (?P<title>.+?)\s*$")
ANCHOR_RE = re.compile(r'^<a id="(?P<id>[^"]+)"></a>\s*$')
META_RE = re.compile(
    r"^\*\*Level:\*\* (?P<level>\w+) · \*\*Profiles:\*\* (?P<profiles>[\w, -]+?) · "
    r"\*\*Kind:\*\* (?P<kind>\w+) · \*\*Since:\*\* (?P<since>[\d.]+)\s*$"
)
SECTION_RE = re.compile(r"^## (?P<number>\d+) (?P<title>.+?)\s*$")


@dataclass(frozen=True)
class Requirement:
    """One requirement block of the spec."""

    id: str
    title: str
    level: str
    keyword: str
    profiles: tuple[str, ...]
    kind: str
    since: str
    section: str
    line: int
    text: str

    @property
    def area(self) -> str:
        """The area code, e.g. ORD for KS-ORD-1."""
        return self.id.split("-")[1]

    @property
    def identifier(self) -> str:
        """The ID as an identifier fragment: KS_ORD_1."""
        return self.id.replace("-", "_")

    def to_index(self) -> dict[str, object]:
        """The entry this requirement gets in requirements.json."""
        entry = asdict(self)
        entry.pop("line")
        entry["profiles"] = list(self.profiles)
        entry["anchor"] = f"key-shared.md#{self.id}"
        return entry


def _blocks(lines: list[str]) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number of the heading, lines of the block) for each requirement heading."""
    starts = [i for i, line in enumerate(lines) if HEADING_RE.match(line)]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        block = lines[start:end]
        # A block ends at the next heading of any level.
        for j in range(1, len(block)):
            if block[j].startswith("#") or ANCHOR_RE.match(block[j]):
                block = block[:j]
                break
        yield start + 1, block


def parse_spec(path: Path = paths.SPEC_FILE) -> list[Requirement]:
    """Parse every requirement block; raise UserError naming the line of the first problem."""
    if not path.is_file():
        raise MissingInput(f"{path}: the spec file does not exist")
    lines = path.read_text(encoding="utf-8").splitlines()
    section_at: dict[int, str] = {}
    current = ""
    for i, line in enumerate(lines):
        match = SECTION_RE.match(line)
        if match:
            current = f"{match['number']} {match['title']}"
        section_at[i + 1] = current
    requirements: list[Requirement] = []
    for line_no, block in _blocks(lines):
        requirements.append(_parse_block(path, line_no, block, lines, section_at[line_no]))
    if not requirements:
        raise UserError(f"{path}: no requirement blocks found")
    return requirements


def _parse_block(path: Path, line_no: int, block: list[str], lines: list[str], section: str) -> Requirement:
    heading = HEADING_RE.match(block[0])
    assert heading is not None
    req_id, title = heading["id"], heading["title"]
    where = f"{path.name}:{line_no}"
    if not ID_RE.match(req_id):
        raise UserError(f"{where}: field 'id': {req_id!r} is not of the form KS-<AREA>-<n>")
    area = req_id.split("-")[1]
    if area not in AREAS:
        raise UserError(f"{where}: field 'id': area {area!r} of {req_id} is not in the registry")
    anchor_line = lines[line_no - 2] if line_no >= 2 else ""
    anchor = ANCHOR_RE.match(anchor_line)
    if anchor is None or anchor["id"] != req_id:
        raise UserError(f"{where}: field 'anchor': {req_id} needs <a id=\"{req_id}\"></a> on the line above")
    body = [line for line in block[1:]]
    meta_index = next((i for i, line in enumerate(body) if line.strip()), None)
    meta = META_RE.match(body[meta_index]) if meta_index is not None else None
    if meta is None or meta_index is None:
        raise UserError(
            f"{where}: field 'metadata': {req_id} needs '**Level:** ... · **Profiles:** ... · "
            "**Kind:** ... · **Since:** ...' under its heading"
        )
    level, kind, since = meta["level"], meta["kind"], meta["since"]
    profiles = tuple(p.strip() for p in meta["profiles"].split(","))
    meta_line = line_no + 1 + meta_index
    if level not in LEVELS:
        raise UserError(f"{path.name}:{meta_line}: field 'level': {level!r} is not one of {LEVELS}")
    if kind not in KINDS:
        raise UserError(f"{path.name}:{meta_line}: field 'kind': {kind!r} is not one of {KINDS}")
    for profile in profiles:
        if profile not in PROFILES:
            raise UserError(f"{path.name}:{meta_line}: field 'profiles': {profile!r} is not one of {PROFILES}")
    normative: list[str] = []
    informative: list[str] = []
    in_normative = True
    for line in body[meta_index + 1 :]:
        if line.startswith("*Rationale") or line.startswith("*Example"):
            in_normative = False
        (normative if in_normative else informative).append(line)
    text = " ".join(" ".join(normative).split())
    if not text:
        raise UserError(f"{where}: field 'text': {req_id} has no normative paragraph")
    keywords = KEYWORD_RE.findall(text)
    if len(keywords) != 1:
        raise UserError(
            f"{where}: field 'text': {req_id} must use exactly one RFC 2119 keyword, found {len(keywords)} "
            f"({', '.join(keywords) or 'none'})"
        )
    keyword = keywords[0]
    if KEYWORD_LEVEL[keyword] != level:
        raise UserError(f"{where}: field 'level': {req_id} says {level} but its text uses {keyword}")
    stray = KEYWORD_RE.findall(" ".join(informative))
    if stray:
        raise UserError(f"{where}: field 'rationale': {req_id}'s non-normative text uses the keyword {stray[0]}")
    if not any(line.startswith("*Rationale") for line in informative):
        raise UserError(f"{where}: field 'rationale': {req_id} needs a '*Rationale (non-normative):*' paragraph")
    return Requirement(req_id, title, level, keyword, profiles, kind, since, section, line_no, text)


def read_retired(path: Path = paths.RETIRED_FILE) -> dict[str, str]:
    """Retired IDs and their notes, from retired.txt (comment lines start with #)."""
    retired: dict[str, str] = {}
    if not path.is_file():
        return retired
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if not ID_RE.match(fields[0]):
            raise UserError(f"{path.name}:{n}: field 'id': {fields[0]!r} is not a requirement ID")
        retired[fields[0]] = "\t".join(fields[1:])
    return retired


def check_ids(requirements: list[Requirement], retired: dict[str, str]) -> list[str]:
    """Problems with the IDs themselves: duplicates and reuse of retired IDs."""
    problems: list[str] = []
    seen: dict[str, int] = {}
    for req in requirements:
        if req.id in seen:
            problems.append(f"key-shared.md:{req.line}: {req.id} is also defined at line {seen[req.id]}")
        seen.setdefault(req.id, req.line)
        if req.id in retired:
            problems.append(f"key-shared.md:{req.line}: {req.id} is retired and must not be reused")
    return problems


def build_index(requirements: list[Requirement]) -> dict[str, object]:
    """The content of requirements.json."""
    from ks_spec import SPEC_VERSION

    return {
        "generated_by": "keyshared spec index",
        "spec_version": SPEC_VERSION,
        "areas": AREAS,
        "requirements": [req.to_index() for req in requirements],
    }


def render_index(requirements: list[Requirement]) -> str:
    """requirements.json as text, stable byte for byte."""
    return json.dumps(build_index(requirements), indent=2, ensure_ascii=False) + "\n"


def load_index(path: Path = paths.REQUIREMENTS_INDEX) -> list[dict[str, object]]:
    """The requirements from the generated index (what tools read at run time)."""
    if not path.is_file():
        raise MissingInput(f"{path}: the requirements index does not exist; run `keyshared spec index`")
    data = json.loads(path.read_text(encoding="utf-8"))
    requirements = data["requirements"]
    assert isinstance(requirements, list)
    return requirements


SCANNED_SUFFIXES = {".py", ".md", ".tla", ".cfg", ".json", ".txt", ".toml", ".jsonl", ""}
SKIPPED_DIRS = {".git", ".venv", "venv", "__pycache__", ".mypy_cache", ".ruff_cache", "node_modules", "build", "dist"}


def iter_repo_files(root: Path) -> Iterable[Path]:
    """Text files of the repository that may cite requirement IDs."""
    for path in sorted(root.rglob("*")):
        if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in path.relative_to(root).parts):
            continue
        if path.is_file() and path.suffix in SCANNED_SUFFIXES and path.stat().st_size < 5_000_000:
            yield path


def find_citations(root: Path) -> dict[str, list[str]]:
    """Every requirement ID cited in the repository, with 'file:line' places."""
    cited: dict[str, list[str]] = {}
    for path in iter_repo_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), start=1):
            for match in CITATION_RE.finditer(line):
                req_id = f"KS-{match.group(1)}-{match.group(2)}"
                cited.setdefault(req_id, []).append(f"{path.relative_to(root)}:{n}")
    return cited


def check_citations(requirements: list[Requirement], root: Path) -> list[str]:
    """Citations of IDs that the spec does not define."""
    known = {req.id for req in requirements}
    problems = []
    for req_id, places in sorted(find_citations(root).items()):
        if req_id not in known:
            problems.append(f"{places[0]}: cites {req_id}, which the spec does not define")
    return problems


def check_spec(root: Path = paths.REPO_ROOT) -> tuple[list[Requirement], list[str]]:
    """Parse and check the whole spec: IDs, citations, freshness of the index."""
    requirements = parse_spec(root / "spec" / "key-shared.md")
    problems = check_ids(requirements, read_retired(root / "spec" / "retired.txt"))
    problems += check_citations(requirements, root)
    index_path = root / "spec" / "requirements.json"
    if not index_path.is_file() or index_path.read_text(encoding="utf-8") != render_index(requirements):
        problems.append("spec/requirements.json is stale: run `keyshared spec index`")
    return requirements, problems
