"""The adapter protocol v2, which accepts v1 (spec/adapter-protocol.md): the in-process `Adapter` protocol,
the messages, and `Connection`, the one interface the harness drives whatever the transport.

Every response is interpreted here, the same way for both transports: an op is `ok` (with its effect
events), `refused` (a refusal the spec defines), or `skipped` (a known gap); anything else raises
`AdapterFault`, which makes a run's verdict unknown, never conformant. With `validate=True` every request
and response is also checked against spec/schemas/adapter-v2.schema.json (the `--validate-protocol` mode).

Long because both transports (in process, and JSON lines over stdio with process supervision and timeouts)
interpret every response here, the same way: that sameness is why it is one module.
"""

from __future__ import annotations

import inspect
import json
import traceback as tracebacks
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol, runtime_checkable

from ks_spec import paths
from ks_spec.config import CONFIG_DEFAULTS
from ks_spec.trace import OP_EVENTS, schema_problem

PROTOCOL_VERSION = 2
"""The version the kit asks for first; it also accepts every version in PROTOCOL_VERSIONS."""
PROTOCOL_VERSIONS = (1, 2)
ADAPTER_SCHEMA = paths.SCHEMA_DIR / "adapter-v2.schema.json"
OPS = (
    "publish",
    "publish_delayed",
    "add_consumer",
    "remove_consumer",
    "disconnect",
    "reconnect",
    "flow",
    "ack",
    "nack",
    "zombie_ack",
    "zombie_nack",
    "extend",
    "tick",
    "release",
    "skip",
    "restart",
    "seek",
    "rollover",
    "split",
    "merge",
    "publish_entry",
)
REFUSAL_CODES = ("unknown_consumer", "duplicate_consumer", "invalid_argument", "not_blocked")
SYSTEM_FAULT = "system_fault"
"""v2: the error code of a valid op the system under test failed or rejected: a finding (`system-fault`), not a
refusal and not an adapter fault (spec/adapter-protocol.md section 2)."""
TIMER_FIELDS = (
    "ack_timeout", "backoff_base", "backoff_max", "evict_after", "persist_interval", "park_after", "timer_slack",
    "persist_flush",
)  # fmt: skip
"""The fields that set up behaviour driven by ticks; with `timers: false` each may only be declared as [0]."""
TIMER_DRAWN = ("ack_timeout", "backoff_base", "evict_after", "persist_interval")
"""The timing fields the kit draws unless declared; with `timers: false` it draws 0 alone for each (no timer)."""
PROFILES = ("strict", "owner", "best-effort")
SELECTORS = (
    "ring", "pulsar-consistent", "pulsar-auto-split", "pulsar-sticky", "danube", "buckets", "partitions", "any"
)  # fmt: skip
POISON_POLICIES = ("drop", "dead-letter", "block")
RESOLUTIONS = ("acked", "dropped", "dead_lettered", "filtered")
"""What an implementation-defined terminal outcome may be declared to stand for (v2 `terminal_outcomes`)."""
CONFIG_FIELDS = tuple(name for name in CONFIG_DEFAULTS if name not in ("profile", "selector"))
"""The configuration fields whose supported values an adapter may declare (v2 `config_values`)."""


@runtime_checkable
class Adapter(Protocol):
    """The in-process transport: one method per command, taking and returning the protocol's dicts.

    `replay(config, ops)` is optional (the `batch` capability). A Python dispatcher implements this
    and is tested as `py:module:factory`, or served over stdio with `serve_stdio`.
    """

    def start(self) -> dict[str, Any]:
        """The protocol version, the implementation and its capabilities."""
        ...

    def reset(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A fresh subscription with this configuration: an op response with no events, or invalid_config."""
        ...

    def op(self, op: Mapping[str, Any]) -> dict[str, Any]:
        """Perform one op; its effect events, a refusal, `errored` or `skipped`."""
        ...

    def stats(self) -> dict[str, Any]:
        """`{"ok": true, "stats": {...}}` (spec section 16), when the `stats` capability is declared."""
        ...

    def stop(self) -> None:
        """Release everything."""
        ...


class AdapterFault(Exception):
    """The adapter failed (crash, timeout, malformed or wrong response, `errored`): the verdict is unknown."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        traceback: str = "",
        stderr: str = "",
        request: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.traceback = traceback
        self.stderr = stderr
        self.request = dict(request) if request is not None else None

    def to_json(self) -> dict[str, Any]:
        """The report's `error` line members."""
        line: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.traceback:
            line["traceback"] = self.traceback
        if self.stderr:
            line["stderr"] = self.stderr
        if self.request is not None:
            line["request"] = self.request
        return line


class StartFailed(AdapterFault):
    """The adapter could not be started, or speaks another protocol version (exit code 78)."""


@dataclass(frozen=True)
class Capabilities:
    """What an implementation declares it supports; the suite draws nothing outside it."""

    profiles: tuple[str, ...]
    selectors: tuple[str, ...]
    ops: tuple[str, ...]
    filters: bool = False
    ack_timeout: bool = False
    poison_policies: tuple[str, ...] = ()
    persist_ack_holes: bool = False
    held_events: bool = False
    stats: bool = False
    batch: bool = False
    deterministic: bool = True
    max_consumers: int = 64
    interactive: bool = True
    """False: the adapter answers `replay` only (a batch engine); the kit drives it a chunk of ops at a time."""
    flow_control: bool = True
    """False: capacity and the window never bind in the adapter; the kit draws them too large to bind."""
    capacity: bool = True
    """v2: False when consumer capacity never binds (v1: `flow_control`)."""
    window: bool = True
    """v2: False when there is no subscription read-ahead window (v1: `flow_control`)."""
    cursor: bool = True
    """v2: False for a system without a persisted cursor: no cursor_persisted events, cursor checks skipped."""
    config_values: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    """v2: for each listed configuration field, the only values the adapter supports; the kit draws no other."""
    terminal_outcomes: Mapping[str, str | None] = field(default_factory=dict)
    """v2: each implementation-defined terminal outcome's name -> the resolution it stands for (None: none)."""
    durable_attempts: bool = False
    """v2: True when deliveries and failures are counted durably, across restarts (KS-RTY-5)."""
    timers: bool = True
    """v2: False for a system with no behaviour driven by ticks: every timing field is 0, a tick has no effect."""
    shared_names: bool = False
    """v2: True when `add_consumer` takes a `hash_name` other members may share (pulsar-consistent, KS-ASN-5)."""
    key_batches: bool = False
    """v2 (spec 1.7): True when `publish_entry` also takes key-based batches outside selector buckets (one key per
    batch, PIP-34) and batches under permits or the look-ahead limit (spec section 17)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Capabilities:
        """Read the `capabilities` of a start response; AdapterFault names a malformed field."""

        def names(field_name: str, allowed: Sequence[str], required: bool) -> tuple[str, ...]:
            value = data.get(field_name)
            if value is None and not required:
                return ()
            if not isinstance(value, list) or not all(isinstance(v, str) and v in allowed for v in value):
                raise StartFailed("protocol", f"start: field 'capabilities.{field_name}': expected a list of {allowed}")
            return tuple(dict.fromkeys(value))

        def flag(field_name: str, default: bool) -> bool:
            value = data.get(field_name, default)
            if not isinstance(value, bool):
                raise StartFailed("protocol", f"start: field 'capabilities.{field_name}': expected true or false")
            return value

        maximum = data.get("max_consumers", 64)
        if not isinstance(maximum, int) or isinstance(maximum, bool) or maximum < 1:
            raise StartFailed("protocol", "start: field 'capabilities.max_consumers': expected an integer >= 1")
        profiles = names("profiles", PROFILES, True)
        selectors = names("selectors", SELECTORS, True)
        if not profiles or not selectors:
            raise StartFailed("protocol", "start: field 'capabilities': at least one profile and one selector")
        if data.get("interactive") is False and data.get("batch") is not True:
            raise StartFailed("protocol", "start: field 'capabilities.interactive': false needs 'batch': true")
        flow_control = flag("flow_control", True)
        timers = flag("timers", True)
        config_values = _config_values(data.get("config_values"))
        if not timers:
            if flag("ack_timeout", False):
                raise StartFailed("protocol", "start: field 'capabilities.ack_timeout': true contradicts timers: false")
            for name in TIMER_FIELDS:
                if any(v != 0 for v in config_values.get(name, (0,))):
                    raise StartFailed(
                        "protocol", f"start: field 'capabilities.config_values.{name}': timers: false allows only [0]"
                    )
                if name in TIMER_DRAWN:
                    config_values[name] = (0,)
        return cls(
            profiles=profiles,
            selectors=selectors,
            ops=names("ops", OPS, True),
            filters=flag("filters", False),
            ack_timeout=flag("ack_timeout", False),
            poison_policies=names("poison_policies", POISON_POLICIES, False),
            persist_ack_holes=flag("persist_ack_holes", False),
            held_events=flag("held_events", False),
            stats=flag("stats", False),
            batch=flag("batch", False),
            deterministic=flag("deterministic", True),
            max_consumers=int(maximum),
            interactive=flag("interactive", True),
            flow_control=flow_control,
            capacity=flag("capacity", flow_control),
            window=flag("window", flow_control),
            cursor=flag("cursor", True),
            config_values=config_values,
            terminal_outcomes=_terminal_outcomes(data.get("terminal_outcomes")),
            durable_attempts=flag("durable_attempts", False),
            timers=timers,
            shared_names=flag("shared_names", False),
            key_batches=flag("key_batches", False),
        )

    def to_json(self) -> dict[str, Any]:
        """As declared, for the report header."""
        return {
            "profiles": list(self.profiles),
            "selectors": list(self.selectors),
            "ops": list(self.ops),
            "filters": self.filters,
            "ack_timeout": self.ack_timeout,
            "poison_policies": list(self.poison_policies),
            "persist_ack_holes": self.persist_ack_holes,
            "held_events": self.held_events,
            "stats": self.stats,
            "batch": self.batch,
            "deterministic": self.deterministic,
            "max_consumers": self.max_consumers,
            "interactive": self.interactive,
            "flow_control": self.flow_control,
            "capacity": self.capacity,
            "window": self.window,
            "cursor": self.cursor,
            "config_values": {name: list(values) for name, values in self.config_values.items()},
            "terminal_outcomes": dict(self.terminal_outcomes),
            "durable_attempts": self.durable_attempts,
            "timers": self.timers,
            **({"shared_names": True} if self.shared_names else {}),
            **({"key_batches": True} if self.key_batches else {}),
        }

    def declared(self) -> dict[str, Any]:
        """What a trace's config event must carry for a checker to judge it as the kit did (v2 fields only)."""
        declared: dict[str, Any] = {}
        if not self.cursor:
            declared["cursor"] = False
        if self.terminal_outcomes:
            declared["terminal_outcomes"] = dict(self.terminal_outcomes)
        if self.durable_attempts:
            declared["durable_attempts"] = True
        return declared

    def narrowed(self, **changes: Any) -> Capabilities:
        """A copy with some capabilities replaced (to run the suite on a subset)."""
        values = {**self.__dict__, **changes}
        return Capabilities(**values)


def _config_values(value: Any) -> dict[str, tuple[Any, ...]]:
    """Read `capabilities.config_values`: {field: [value, ...]} for known fields, each list non-empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise StartFailed("protocol", "start: field 'capabilities.config_values': expected an object")
    values: dict[str, tuple[Any, ...]] = {}
    for name, allowed in value.items():
        if name not in CONFIG_FIELDS:
            raise StartFailed(
                "protocol", f"start: field 'capabilities.config_values.{name}': not a configuration field"
            )
        if not isinstance(allowed, list) or not allowed:
            raise StartFailed(
                "protocol", f"start: field 'capabilities.config_values.{name}': expected a non-empty list"
            )
        values[name] = tuple(dict.fromkeys(allowed))
    return values


def _terminal_outcomes(value: Any) -> dict[str, str | None]:
    """Read `capabilities.terminal_outcomes`: {outcome name: a resolution of RESOLUTIONS, or null}."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise StartFailed("protocol", "start: field 'capabilities.terminal_outcomes': expected an object")
    for name, resolution in value.items():
        if resolution is not None and resolution not in RESOLUTIONS:
            raise StartFailed(
                "protocol",
                f"start: field 'capabilities.terminal_outcomes.{name}': expected null or one of {list(RESOLUTIONS)}",
            )
    return dict(value)


@dataclass(frozen=True)
class StartInfo:
    """The answer to `start`."""

    version: int
    implementation: dict[str, Any]
    capabilities: Capabilities


@dataclass(frozen=True)
class Outcome:
    """What one reset or op did: `ok` (with effect events), `refused` (a spec refusal) or `skipped`."""

    kind: str
    events: list[dict[str, Any]] = field(default_factory=list)
    placement: dict[str, Any] | None = None
    placements: list[dict[str, Any]] | None = None
    """For `publish_entry`: each message's placement, in offset order."""
    segments: list[dict[str, Any]] | None = None
    """For `split` and `merge` with `layout = "reported"`: the segments created, as the dispatcher chose them."""
    code: str | None = None
    message: str = ""
    error_field: str | None = None
    issue_url: str | None = None
    refused_events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True if the op was performed."""
        return self.kind == "ok"


@cache
def _schema() -> dict[str, Any]:
    with open(ADAPTER_SCHEMA, encoding="utf-8") as handle:
        loaded: dict[str, Any] = json.load(handle)
    return loaded


@cache
def _validator(definition: str) -> Any:
    import jsonschema

    schema = _schema()
    return jsonschema.Draft7Validator({"definitions": schema["definitions"], "$ref": f"#/definitions/{definition}"})


def protocol_problem(message: Any, definition: str) -> str | None:
    """None if `message` matches the schema definition (`request`, `start_response`, `op_response`, ...)."""
    errors = list(_validator(definition).iter_errors(message))
    if not errors:
        return None
    best = min(errors, key=lambda e: (len(list(e.absolute_path)), str(e.message)))
    deepest = max(errors, key=lambda e: len(list(e.absolute_path)))
    chosen = deepest if best.validator in ("oneOf", "anyOf") else best
    if chosen.validator in ("oneOf", "anyOf") and chosen.context:
        chosen = max(chosen.context, key=lambda e: len(list(e.absolute_path)))
    place = ".".join(str(p) for p in chosen.absolute_path) or "(message)"
    return f"field '{place}': {chosen.message}"


def start_info(response: Any, validate: bool) -> StartInfo:
    """Interpret the start response; StartFailed names what is wrong."""
    if not isinstance(response, Mapping):
        raise StartFailed("protocol", f"start: expected a JSON object, got {type(response).__name__}")
    if validate:
        problem = protocol_problem(response, "start_response")
        if problem:
            raise StartFailed("protocol", f"start: {problem}")
    version = response.get("version")
    if version not in PROTOCOL_VERSIONS:
        speaks = " and ".join(str(v) for v in PROTOCOL_VERSIONS)
        raise StartFailed("protocol", f"start: protocol version {version!r}, the kit speaks {speaks}")
    implementation = response.get("implementation")
    if not isinstance(implementation, Mapping) or not isinstance(implementation.get("name"), str):
        raise StartFailed("protocol", "start: field 'implementation': an object with at least a 'name'")
    capabilities = response.get("capabilities")
    if not isinstance(capabilities, Mapping):
        raise StartFailed("protocol", "start: field 'capabilities': expected an object")
    return StartInfo(version, dict(implementation), Capabilities.from_json(capabilities))


def interpret(response: Any, request: Mapping[str, Any], validate: bool) -> Outcome:
    """Turn an op (or reset) response into an Outcome, or raise AdapterFault for anything the protocol forbids."""
    what = _describe(request)
    if not isinstance(response, Mapping):
        raise AdapterFault("malformed", f"{what}: the response is not a JSON object", request=request)
    if validate:
        problem = protocol_problem(response, "op_response")
        if problem:
            raise AdapterFault("protocol", f"{what}: {problem}", request=request)
    if response.get("errored") is True:
        context = response.get("context")
        context = context if isinstance(context, Mapping) else {}
        raise AdapterFault(
            "errored",
            f"{what}: the implementation failed: {context.get('message', '(no message)')}",
            traceback=str(context.get("traceback", "")),
            stderr=str(context.get("stderr", "")),
            request=request,
        )
    if response.get("skipped") is True:
        return Outcome(
            "skipped", message=str(response.get("message", "")), issue_url=_str_or_none(response, "issue_url")
        )
    ok = response.get("ok")
    if ok is False:
        error = response.get("error")
        if not isinstance(error, Mapping) or not isinstance(error.get("code"), str):
            raise AdapterFault("malformed", f"{what}: a refusal needs error.code", request=request)
        events = response.get("events")
        if error["code"] == SYSTEM_FAULT and events:
            raise AdapterFault("malformed", f"{what}: a system_fault reports no events", request=request)
        return Outcome(
            "refused",
            code=str(error["code"]),
            message=str(error.get("message", "")),
            error_field=_str_or_none(error, "field"),
            refused_events=list(events) if isinstance(events, list) else [],
        )
    if ok is not True:
        raise AdapterFault("malformed", f"{what}: the response has neither ok, errored nor skipped", request=request)
    events = response.get("events")
    if not isinstance(events, list):
        raise AdapterFault("malformed", f"{what}: field 'events': expected a list", request=request)
    for index, event in enumerate(events):
        problem = effect_problem(event)
        if problem:
            raise AdapterFault("malformed", f"{what}: events[{index}]: {problem}", request=request)
    placement = response.get("placement")
    if placement is not None and not isinstance(placement, Mapping):
        raise AdapterFault("malformed", f"{what}: field 'placement': expected an object", request=request)
    placements = response.get("placements")
    if placements is not None and (
        not isinstance(placements, list) or not all(isinstance(p, Mapping) for p in placements)
    ):
        raise AdapterFault("malformed", f"{what}: field 'placements': expected a list of objects", request=request)
    segments = response.get("segments")
    if segments is not None and (not isinstance(segments, list) or not all(isinstance(s, Mapping) for s in segments)):
        raise AdapterFault("malformed", f"{what}: field 'segments': expected a list of objects", request=request)
    return Outcome(
        "ok",
        events=[dict(e) for e in events],
        placement=dict(placement) if placement else None,
        placements=[dict(p) for p in placements] if placements is not None else None,
        segments=[dict(s) for s in segments] if segments is not None else None,
    )


def effect_problem(event: Any) -> str | None:
    """None if `event` is a well-formed effect event of the trace format (without seq and tick)."""
    if not isinstance(event, Mapping):
        return "expected a JSON object"
    if "seq" in event or "tick" in event:
        return "effect events carry no seq or tick: the kit numbers them"
    kind = event.get("event")
    if kind in OP_EVENTS:
        return f"'{kind}' is an op event, written by the kit; an adapter reports effects only"
    return schema_problem({"seq": 0, "tick": 0, **event})


def start_adapter(adapter: Any, version: Any) -> Any:
    """Call the adapter's `start`, with the version the kit asked for when it takes one (`start(version)`)."""
    try:
        takes_version = bool(inspect.signature(adapter.start).parameters)
    except (TypeError, ValueError):
        takes_version = False
    return adapter.start(version) if takes_version else adapter.start()


def _str_or_none(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    return value if isinstance(value, str) else None


def _short(request: Mapping[str, Any]) -> dict[str, Any]:
    """A replay request as fault context: its config and op count, not every op."""
    ops = request.get("ops", [])
    return {"cmd": request.get("cmd"), "seq": request.get("seq"), "config": request.get("config"), "ops": len(ops)}


def _describe(request: Mapping[str, Any]) -> str:
    if request.get("cmd") == "op":
        op = request.get("op", {})
        arguments = ", ".join(f"{k}={v!r}" for k, v in op.items() if k != "op")
        return f"op {op.get('op')}({arguments})"
    return str(request.get("cmd", "request"))


class Connection(ABC):
    """A started adapter behind either transport: the harness's only view of an implementation."""

    adapter: str
    """The adapter as the user named it (`reference`, `py:...`, `cmd:...`)."""
    transport: str
    validate: bool = False

    @abstractmethod
    def request(self, message: dict[str, Any]) -> Any:
        """Send one request (with cmd and, but for start and stop, seq) and return the raw response."""

    @abstractmethod
    def close(self) -> None:
        """Stop the adapter and release its resources."""

    def __init__(self) -> None:
        self._seq = 0
        self.info: StartInfo | None = None
        self.exchanges: list[tuple[dict[str, Any], Any]] | None = None
        """When a list, every (request, response) pair is appended to it (`smoke` prints them)."""

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _send(self, message: dict[str, Any]) -> Any:
        if self.validate:
            problem = protocol_problem(message, "request")
            if problem:
                raise AdapterFault("internal", f"the kit built an invalid request ({problem}): {message}")
        response = self.request(message)
        if self.exchanges is not None:
            self.exchanges.append((message, response))
        return response

    def start(self) -> StartInfo:
        """Start the adapter and read its implementation and capabilities."""
        try:
            try:
                response = self._send({"cmd": "start", "version": PROTOCOL_VERSION})
            except StartFailed as refused:
                # A v1 adapter exits on a version it does not speak: start it again and ask for version 1.
                if not self.restartable(refused):
                    raise
                response = self._send({"cmd": "start", "version": 1})
        except StartFailed:
            raise
        except AdapterFault as fault:
            raise StartFailed(
                fault.kind, f"start: {fault.message}", traceback=fault.traceback, stderr=fault.stderr
            ) from None
        self.info = start_info(response, self.validate)
        return self.info

    def restartable(self, refused: StartFailed) -> bool:
        """True if a start refused this way may be retried with protocol version 1 (stdio adapters that exited)."""
        return False

    def reset(self, config: Mapping[str, Any]) -> Outcome:
        """A fresh subscription with this configuration."""
        request = {"cmd": "reset", "seq": self._next_seq(), "config": dict(config)}
        return interpret(self._send(request), request, self.validate)

    def op(self, op: Mapping[str, Any]) -> Outcome:
        """Perform one op."""
        request = {"cmd": "op", "seq": self._next_seq(), "op": dict(op)}
        return interpret(self._send(request), request, self.validate)

    def replay(self, config: Mapping[str, Any], ops: Sequence[Mapping[str, Any]]) -> list[Outcome] | Outcome:
        """Reset with `config` and perform every op in one request (the `batch` capability).

        One Outcome per op, or the reset's refusal (an Outcome that is not ok) when the configuration is refused.
        """
        request = {"cmd": "replay", "seq": self._next_seq(), "config": dict(config), "ops": [dict(op) for op in ops]}
        response = self._send(request)
        if self.validate:
            problem = protocol_problem(response, "replay_response")
            if problem:
                raise AdapterFault("protocol", f"replay: {problem}", request=_short(request))
        if not isinstance(response, Mapping):
            raise AdapterFault("malformed", "replay: the response is not a JSON object", request=_short(request))
        if response.get("ok") is not True or "results" not in response:
            return interpret(response, _short(request), False)
        results = response["results"]
        if not isinstance(results, list) or len(results) != len(ops):
            got = len(results) if isinstance(results, list) else type(results).__name__
            raise AdapterFault("malformed", f"replay: {len(ops)} ops but {got} results", request=_short(request))
        outcomes = []
        for op, result in zip(ops, results, strict=True):
            outcomes.append(interpret(result, {"cmd": "op", "op": dict(op)}, self.validate))
        return outcomes

    def stats(self) -> dict[str, Any]:
        """The stats object (only when the `stats` capability is declared)."""
        request = {"cmd": "stats", "seq": self._next_seq()}
        response = self._send(request)
        if self.validate:
            problem = protocol_problem(response, "stats_response")
            if problem:
                raise AdapterFault("protocol", f"stats: {problem}", request=request)
        if isinstance(response, Mapping) and response.get("errored") is True:
            interpret(response, request, False)
        if (
            not isinstance(response, Mapping)
            or response.get("ok") is not True
            or not isinstance(response.get("stats"), Mapping)
        ):
            raise AdapterFault("malformed", "stats: expected {'ok': true, 'stats': {...}}", request=request)
        return dict(response["stats"])

    def stop(self) -> None:
        """Ask the adapter to stop, then release it."""
        self.close()


class InProcessConnection(Connection):
    """The in-process transport: the same message dicts, passed to an `Adapter` object's methods."""

    transport = "in-process"

    def __init__(self, adapter_object: Any, adapter: str, validate: bool = False) -> None:
        super().__init__()
        self.target = adapter_object
        self.adapter = adapter
        self.validate = validate
        for method in ("start", "reset", "op", "stop"):
            if not callable(getattr(adapter_object, method, None)):
                raise StartFailed("start-failed", f"{adapter}: the adapter object has no {method}() method")

    def request(self, message: dict[str, Any]) -> Any:
        """Call the method named by `cmd`; an exception is an adapter fault with its traceback."""
        command = message["cmd"]
        try:
            if command == "start":
                return start_adapter(self.target, message["version"])
            if command == "reset":
                response = self.target.reset(message["config"])
            elif command == "op":
                response = self.target.op(message["op"])
            elif command == "stats":
                response = self.target.stats()
            elif command == "replay":
                response = self.target.replay(message["config"], message["ops"])
            else:
                raise AdapterFault("internal", f"unknown command {command!r}")
        except AdapterFault:
            raise
        except Exception as error:
            raise AdapterFault(
                "crash",
                f"{_describe(message)}: {type(error).__name__}: {error}",
                traceback=tracebacks.format_exc(),
                request=message,
            ) from None
        return response

    def close(self) -> None:
        """Call stop() on the adapter object."""
        try:
            self.target.stop()
        except Exception:  # stopping a broken adapter must not hide the run's result
            pass
