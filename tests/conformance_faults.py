"""A stdio adapter that breaks the protocol on purpose: the kit must call such runs unknown, never conformant.

`python tests/conformance_faults.py MODE [N]` serves the reference over JSON lines and, at the N-th op
(default 25), misbehaves as MODE says: `crash` (exits), `garbage` (a line that is not JSON), `wrong-seq`
(echoes another seq), `hang` (never answers), `errored` (reports an implementation failure). `bad-version`
answers `start` with protocol version 99 (the kit speaks 1 and 2); `no-start` exits before answering anything.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

from ks_reference.adapter import create


def main(argv: list[str]) -> int:
    """Serve until `stop` or the end, misbehaving once as asked; the reference's temporary store goes either way."""
    adapter = create()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # the kit ends a hang so
    try:
        return _serve(adapter, argv[1], int(argv[2]) if len(argv) > 2 else 25)
    finally:
        adapter.stop()


def _serve(adapter: Any, mode: str, at: int) -> int:
    ops = 0
    for line in sys.stdin:
        request: dict[str, Any] = json.loads(line)
        command = request["cmd"]
        if command == "start":
            if mode == "no-start":
                return 3
            info = adapter.start()
            if mode == "bad-version":
                info["version"] = 99
            _send(info)
            continue
        if command == "stop":
            return 0
        seq = request.get("seq")
        if command == "op":
            ops += 1
            if ops == at:
                if mode == "crash":
                    return 1
                if mode == "garbage":
                    sys.stdout.write("this is not json\n")
                    sys.stdout.flush()
                    continue
                if mode == "hang":
                    time.sleep(3600)
                if mode == "errored":
                    _send({"seq": seq, "errored": True, "context": {"message": "injected", "traceback": ""}})
                    continue
                if mode == "wrong-seq":
                    seq = -1 if seq != -1 else -2
            response = adapter.op(request["op"])
        elif command == "reset":
            response = adapter.reset(request["config"])
        elif command == "stats":
            response = adapter.stats()
        else:
            response = adapter.replay(request["config"], request["ops"])
        _send({"seq": seq, **response})
    return 0


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
