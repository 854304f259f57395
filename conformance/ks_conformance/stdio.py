"""The stdio transport: JSON lines over an adapter process's standard input and output.

`StdioConnection` starts `cmd:...` adapters and talks to them under time limits: a crash, a line that is
not JSON, a wrong `seq` or no answer in time is an `AdapterFault` carrying the adapter's last lines of
standard error. `serve_stdio(adapter)` is the other side, for any Python object that implements the
in-process `Adapter` protocol (the reference is served this way).
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import traceback
from collections import deque
from collections.abc import Mapping
from typing import IO, Any

from ks_conformance.protocol import PROTOCOL_VERSIONS, AdapterFault, Connection, StartFailed, start_adapter

DEFAULT_TIMEOUT = 10.0
START_TIMEOUT = 60.0
STDERR_LINES = 40


class StdioConnection(Connection):
    """A started adapter process; one request per line, one response line per request, in order."""

    transport = "stdio"

    def __init__(
        self,
        command: str,
        adapter: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        start_timeout: float = START_TIMEOUT,
        validate: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.command = command
        self.adapter = adapter or f"cmd:{command}"
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.validate = validate
        self.env = dict(env) if env is not None else None
        self.process: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self.dead: AdapterFault | None = None

    def spawn(self) -> None:
        """Start the process (idempotent)."""
        if self.process is not None:
            return
        try:
            argv = shlex.split(self.command)
        except ValueError as error:
            raise StartFailed("start-failed", f"{self.adapter}: cannot parse the command ({error})") from None
        if not argv:
            raise StartFailed("start-failed", f"{self.adapter}: empty command")
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, **self.env} if self.env is not None else None,
            )
        except OSError as error:
            raise StartFailed("start-failed", f"{self.adapter}: cannot start {argv[0]!r}: {error}") from None
        threading.Thread(target=self._read_stdout, args=(self.process, self._lines), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(self.process,), daemon=True).start()

    def _read_stdout(self, process: subprocess.Popen[bytes], lines: queue.Queue[bytes | None]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    def _read_stderr(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self._stderr.append(line.decode("utf-8", errors="replace").rstrip("\n"))

    def stderr_tail(self) -> str:
        """The adapter's last lines of standard error."""
        return "\n".join(self._stderr)

    def _fault(self, kind: str, message: str, request: Mapping[str, Any]) -> AdapterFault:
        fault = AdapterFault(kind, f"{self.adapter}: {message}", stderr=self.stderr_tail(), request=request)
        self.dead = fault
        return fault

    def request(self, message: dict[str, Any]) -> Any:
        """Write one request line and read one response line under the time limit."""
        if self.dead is not None:
            raise AdapterFault(
                self.dead.kind,
                f"{self.adapter}: the adapter is no longer usable ({self.dead.message})",
                request=message,
            )
        if message["cmd"] == "start":
            self.spawn()
        assert self.process is not None and self.process.stdin is not None
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"
        try:
            self.process.stdin.write(line.encode("utf-8"))
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._crashed(message) from None
        limit = self.start_timeout if message["cmd"] == "start" else self.timeout
        try:
            raw = self._lines.get(timeout=limit)
        except queue.Empty:
            raise self._fault("timeout", f"no answer to {message['cmd']} within {limit:g} s", message) from None
        if raw is None:
            raise self._crashed(message)
        try:
            response = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
        except (UnicodeDecodeError, ValueError) as error:
            shown = raw[:200].decode("utf-8", errors="replace").rstrip()
            raise self._fault(
                "malformed", f"the answer to {message['cmd']} is not a JSON line ({error}): {shown}", message
            ) from None
        if "seq" in message:
            if not isinstance(response, dict) or response.get("seq") != message["seq"]:
                got = response.get("seq") if isinstance(response, dict) else None
                raise self._fault(
                    "wrong-seq", f"answered seq {got!r} to a request with seq {message['seq']!r}", message
                )
            response = {k: v for k, v in response.items() if k != "seq"}
        return response

    def restartable(self, refused: StartFailed) -> bool:
        """A v1 adapter exits when asked for version 2: forget the dead process so the next start spawns anew."""
        if refused.kind != "start-failed" or self.process is None or self.process.poll() is None:
            return False
        self.process = None
        self.dead = None
        self._lines = queue.Queue()
        return True

    def _crashed(self, message: Mapping[str, Any]) -> AdapterFault:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        status = f"exited with status {code}" if code is not None else "closed its output"
        kind = "start-failed" if message.get("cmd") == "start" else "crash"
        fault = self._fault(kind, f"the adapter {status} while answering {message.get('cmd')}", message)
        if kind == "start-failed":
            return StartFailed(kind, fault.message, stderr=fault.stderr)
        return fault

    def close(self) -> None:
        """Send stop, wait briefly for a clean exit, then terminate."""
        process = self.process
        if process is None:
            return
        self.process = None
        try:
            if process.stdin is not None and process.poll() is None:
                process.stdin.write(b'{"cmd":"stop"}\n')
                process.stdin.flush()
                process.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            # SIGTERM first, so an adapter stuck in its work can still release what it holds; then SIGKILL.
            process.terminate()
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def serve_stdio(adapter: Any, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    """Serve an in-process adapter over stdio until `stop` or end of input; return the exit status.

    Each request line gets exactly one response line, flushed; `seq` is echoed. An exception in the
    adapter becomes an `errored` response with its traceback; a `start` with another protocol version
    writes a message to standard error and exits with status 2.
    """
    source = stdin if stdin is not None else sys.stdin
    sink = stdout if stdout is not None else sys.stdout
    if stdout is None:
        sys.stdout = sys.stderr  # a stray print() in the adapter must not corrupt the protocol stream
    previous = _exit_on_sigterm()
    try:
        return _serve(adapter, source, sink)
    except (SystemExit, KeyboardInterrupt):
        _stop(adapter)  # terminated by the kit or interrupted: still release what the adapter holds
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if stdout is None:
            sys.stdout = sink


def _exit_on_sigterm() -> Any:
    """Turn SIGTERM into SystemExit (status 143) in the main thread; return the handler it replaced."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def terminated(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, terminated)


def _serve(adapter: Any, source: IO[str], sink: IO[str]) -> int:
    for line in source:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError as error:
            _write(sink, {"errored": True, "context": {"message": f"request is not JSON: {error}"}})
            continue
        if not isinstance(request, dict):
            _write(sink, {"errored": True, "context": {"message": "request is not a JSON object"}})
            continue
        command = request.get("cmd")
        if command == "stop":
            _stop(adapter)
            return 0
        if command == "start" and request.get("version") not in PROTOCOL_VERSIONS:
            print(
                f"adapter protocol version {request.get('version')!r} is not supported (this adapter speaks "
                f"{' and '.join(str(v) for v in PROTOCOL_VERSIONS)})",
                file=sys.stderr,
            )
            _stop(adapter)
            return 2
        response = _dispatch(adapter, command, request)
        if "seq" in request and isinstance(response, dict):
            response = {"seq": request["seq"], **response}
        _write(sink, response)
    _stop(adapter)
    return 0


def _dispatch(adapter: Any, command: Any, request: dict[str, Any]) -> Any:
    try:
        if command == "start":
            return start_adapter(adapter, request.get("version"))
        if command == "reset":
            return adapter.reset(request.get("config", {}))
        if command == "op":
            return adapter.op(request.get("op", {}))
        if command == "stats":
            return adapter.stats()
        if command == "replay":
            return adapter.replay(request.get("config", {}), request.get("ops", []))
        return {"errored": True, "context": {"message": f"unknown command {command!r}"}}
    except Exception as error:
        return {
            "errored": True,
            "context": {"message": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()},
        }


def _write(sink: IO[str], response: Any) -> None:
    sink.write(json.dumps(response, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    sink.write("\n")
    sink.flush()


def _stop(adapter: Any) -> None:
    stop = getattr(adapter, "stop", None)
    if callable(stop):
        stop()
