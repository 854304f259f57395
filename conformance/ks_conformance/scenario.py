"""Replayable scenarios (spec/scenario-format.md): a configuration and the steps that lead to a violation.

Every failure the suite finds is saved as a scenario file, JSON lines, language-neutral: a header
line, then one line per step (an op with the refusal it must get, if any, or a `settle` directive).
`replay` runs one against any adapter and judges it with the same checks as a run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ks_spec import SPEC_VERSION, paths
from ks_spec.errors import MissingInput, UserError

from ks_conformance.anomalies import Anomaly
from ks_conformance.batch import AnySession, open_session
from ks_conformance.harness import Step
from ks_conformance.protocol import Capabilities, Connection

SCENARIO_VERSION = 1
SCENARIO_SCHEMA = paths.SCHEMA_DIR / "scenario-v1.schema.json"


@dataclass
class Scenario:
    """A configuration and its steps, with what it was found to violate."""

    config: dict[str, Any]
    steps: list[Step]
    covers: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    description: str = ""
    found: dict[str, Any] = field(default_factory=dict)
    tolerates: list[str] = field(default_factory=list)
    """Anomaly kinds a settle goes on past (kinds the run had found already when it ran these steps)."""
    vector: dict[str, Any] = field(default_factory=dict)
    """A conformance vector's annotation (spec/vectors/README.md); empty for a plain scenario."""

    @property
    def id(self) -> str:
        """A stable ID: the first covered requirement and a hash of the normalised config and steps."""
        body = json.dumps(
            {"config": self.config, "steps": [s.to_json() for s in self.steps]}, sort_keys=True, separators=(",", ":")
        )
        digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:10]
        return f"{self.covers[0] if self.covers else 'scenario'}-{digest}"

    def lines(self) -> list[dict[str, Any]]:
        """The file's lines: header, then one per step."""
        head: dict[str, Any] = {
            "scenario_version": SCENARIO_VERSION,
            "id": self.id,
            "spec_version": SPEC_VERSION,
            "covers": self.covers,
            "anomalies": self.anomalies,
            "config": self.config,
        }
        if self.description:
            head["description"] = self.description
        if self.tolerates:
            head["tolerates"] = self.tolerates
        if self.found:
            head["found"] = self.found
        if self.vector:
            head["vector"] = self.vector
        return [head, *(step.to_json() for step in self.steps)]


def write_scenario(scenario: Scenario, folder: Path) -> Path:
    """Write `<folder>/<id>.jsonl` atomically and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{scenario.id}.jsonl"
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for line in scenario.lines():
                handle.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


@cache
def _validator(definition: str) -> Any:
    import jsonschema
    from referencing import Registry, Resource

    from ks_conformance.protocol import ADAPTER_SCHEMA

    with open(SCENARIO_SCHEMA, encoding="utf-8") as handle:
        schema = json.load(handle)
    with open(ADAPTER_SCHEMA, encoding="utf-8") as handle:
        adapter = json.load(handle)
    registry: Registry[Any] = Registry().with_resources(
        [(adapter["$id"], Resource.from_contents(adapter)), (schema["$id"], Resource.from_contents(schema))]
    )
    return jsonschema.Draft7Validator({"$ref": f"{schema['$id']}#/definitions/{definition}"}, registry=registry)


def _most_specific(error: Any) -> Any:
    """For a line that fits none of a `oneOf`'s branches, the deepest error among them (the field that is wrong)."""
    while error.context:
        error = max(error.context, key=lambda e: len(list(e.absolute_path)))
    return error


def read_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file; UserError names the line and field of a problem."""
    if not path.is_file():
        raise MissingInput(f"{path}: no such scenario file")
    lines: list[tuple[int, Any]] = []
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                lines.append((number, json.loads(text)))
            except json.JSONDecodeError as error:
                raise UserError(f"{path}:{number}: field '(line)': not valid JSON ({error.msg})") from None
    if not lines:
        raise UserError(f"{path}: the scenario is empty")
    for number, line in lines:
        definition = "header" if number == lines[0][0] else "step"
        errors = list(_validator(definition).iter_errors(line))
        if errors:
            first = _most_specific(min(errors, key=lambda e: len(list(e.absolute_path))))
            place = ".".join(str(p) for p in first.absolute_path) or "(line)"
            raise UserError(f"{path}:{number}: field '{place}': {first.message}")
    head = lines[0][1]
    return Scenario(
        config=dict(head["config"]),
        steps=[Step.from_json(line) for _, line in lines[1:]],
        covers=list(head.get("covers", [])),
        anomalies=list(head.get("anomalies", [])),
        description=str(head.get("description", "")),
        found=dict(head.get("found", {})),
        tolerates=list(head.get("tolerates", [])),
        vector=dict(head.get("vector", {})),
    )


def needs(scenario: Scenario) -> list[str]:
    """What the scenario needs from an adapter: its profile, selector, ops and configuration capabilities."""
    needed = [
        f"profile {scenario.config.get('profile', 'strict')}",
        f"selector {scenario.config.get('selector', 'ring')}",
    ]
    needed += sorted({f"op {s.op['op']}" for s in scenario.steps if s.op is not None})
    return needed


def unmet(scenario: Scenario, capabilities: Capabilities) -> list[str]:
    """The needs of a scenario that the adapter's capabilities do not declare."""
    missing: list[str] = []
    config = scenario.config
    if config.get("profile", "strict") not in capabilities.profiles:
        missing.append(f"profile {config.get('profile', 'strict')}")
    if config.get("selector", "ring") not in capabilities.selectors:
        missing.append(f"selector {config.get('selector', 'ring')}")
    for name in sorted({s.op["op"] for s in scenario.steps if s.op is not None}):
        if name not in capabilities.ops:
            missing.append(f"op {name}")
    if config.get("ack_timeout") and not capabilities.ack_timeout:
        missing.append("capability ack_timeout")
    if config.get("persist_ack_holes") and not capabilities.persist_ack_holes:
        missing.append("capability persist_ack_holes")
    policy = config.get("poison_policy")
    if policy is not None and policy not in capabilities.poison_policies:
        missing.append(f"poison policy {policy}")
    if any(s.op is not None and s.op.get("filters") for s in scenario.steps) and not capabilities.filters:
        missing.append("capability filters")
    if any(s.op is not None and "hash_name" in s.op for s in scenario.steps) and not capabilities.shared_names:
        missing.append("capability shared_names")
    batches = any(s.op is not None and s.op["op"] == "publish_entry" for s in scenario.steps)
    key_batch_form = (
        config.get("selector", "ring") != "buckets"
        or config.get("flow_control", "capacity") != "capacity"
        or config.get("read_bound", "window") != "window"
    )
    if batches and key_batch_form and not capabilities.key_batches:
        missing.append("capability key_batches (batches outside selector buckets, or under permits or the look-ahead)")
    settles = any(s.settle is not None for s in scenario.steps)
    if settles and config.get("flow_control") == "permits" and "flow" not in capabilities.ops:
        missing.append("op flow (a settle under permits grants them, spec/scenario-format.md section 3)")
    return missing


@dataclass
class Replay:
    """What replaying a scenario against one adapter showed."""

    session: AnySession | None
    skipped: list[str] = field(default_factory=list)
    refused_config: str | None = None

    @property
    def anomalies(self) -> list[Anomaly]:
        """Every anomaly of the replay."""
        return list(self.session.anomalies) if self.session is not None else []


def replay(
    scenario: Scenario,
    connection: Connection,
    capabilities: Capabilities,
    implementation: Mapping[str, Any] | None = None,
    check_stats: bool = True,
    batch: bool | None = None,
) -> Replay:
    """Run a scenario's steps against a started connection and judge them (in batch mode for a batch engine)."""
    missing = unmet(scenario, capabilities)
    if missing:
        return Replay(None, skipped=missing)
    batched = not capabilities.interactive if batch is None else batch
    session = open_session(
        connection,
        capabilities,
        scenario.config,
        batch=batched,
        check_stats=check_stats,
        implementation=implementation,
        tolerated=scenario.tolerates,
    )
    outcome = session.begin()
    if not outcome.ok:
        return Replay(None, refused_config=f"{outcome.code}: {outcome.message}")
    for number, step in enumerate(scenario.steps):
        if step.settle is not None:
            session.settle(step.settle, seed=number)
        elif step.op is not None:
            session.perform(step.op, expect=step.expect)
    session.flush()
    return Replay(session)
