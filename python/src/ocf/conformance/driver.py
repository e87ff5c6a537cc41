"""Talking to an adapter (conformance/protocol.md): one process, JSON lines.

:class:`Adapter` starts the adapter command, greets it with ``hello``, and
sends one request at a time, waiting at most ``timeout`` seconds for the
answer. An adapter that times out, exits or breaks the protocol is killed
and raises :class:`AdapterError`; the next request starts a fresh process.
The adapter's stderr goes to a log file, whose last line is quoted when the
adapter dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PROTOCOL = 1
# Responses are small (paths, digests, metadata); a longer line is a broken adapter.
MAX_LINE = 64 << 20
_EXIT_GRACE = 5.0  # seconds an adapter has to exit after bye
# Seconds an adapter has to answer hello: starting a runtime (a JVM, Python importing its
# libraries on a loaded machine) is not what --timeout limits.
START_TIMEOUT = 60.0
Message = dict[str, Any]


class AdapterError(Exception):
    """The adapter did not answer a request properly; it has been stopped."""


class AdapterTimeoutError(AdapterError):
    pass


class AdapterCrashError(AdapterError):
    pass


class ProtocolError(AdapterError):
    pass


class StartError(Exception):
    """The adapter could not be started, or did not answer hello properly."""


@dataclass(frozen=True)
class Hello:
    """What an adapter says about itself in answer to hello."""

    name: str
    version: str
    protocol: int
    ops: tuple[str, ...]
    features: tuple[str, ...]
    # The conformance profiles the adapter claims; None when its hello declares none,
    # which claims every profile (adapters older than profiles are judged on all).
    profiles: tuple[str, ...] | None = None


class Adapter:
    """One adapter process at a time, restarted after each failure."""

    def __init__(self, command: Sequence[str], *, timeout: float, log: Path) -> None:
        self.command = list(command)
        self.timeout = timeout
        self.log = log
        self.hello: Hello | None = None
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._next_id = 0

    @property
    def restarts(self) -> int:
        return max(0, self.starts - 1)

    def start(self) -> Hello:
        """Start the adapter and greet it; StartError if that fails."""
        self._spawn()
        try:
            self.hello = _hello(self._exchange({"op": "hello", "protocol": PROTOCOL},
                                               timeout=max(self.timeout, START_TIMEOUT)))
        except AdapterError as exc:
            self._kill()
            raise StartError(f"{' '.join(self.command)}: {exc}") from None
        return self.hello

    def request(self, message: Message) -> Message:
        """The adapter's response to ``message``; starts the adapter if it is not running."""
        if self._process is None:
            self.start()
        return self._exchange(message)

    def close(self) -> None:
        """Say bye and give the adapter a moment to exit, then kill it."""
        process = self._process
        if process is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._send({"op": "bye"})
            assert process.stdin is not None
            process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(_EXIT_GRACE)
        self._kill()

    def __enter__(self) -> Adapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one exchange ---------------------------------------------------------

    def _exchange(self, message: Message, *, timeout: float | None = None) -> Message:
        try:
            request_id = self._send(message)
        except (OSError, ValueError):
            raise self._failed(AdapterCrashError(f"adapter stopped reading requests"
                                            f"{self._exit_reason()}")) from None
        try:
            line = self._lines.get(timeout=timeout or self.timeout)
        except queue.Empty:
            raise self._failed(AdapterTimeoutError(
                f"timeout: no response within {timeout or self.timeout:g} s")) from None
        if line is None:
            raise self._failed(AdapterCrashError(f"adapter closed its output{self._exit_reason()}"))
        try:
            return _response(line, request_id)
        except ProtocolError as exc:
            raise self._failed(exc) from None

    def _send(self, message: Message) -> int:
        process = self._process
        assert process is not None
        assert process.stdin is not None
        self._next_id += 1
        line = json.dumps({"id": self._next_id, **message}) + "\n"
        process.stdin.write(line.encode("utf-8"))
        process.stdin.flush()
        return self._next_id

    def _failed(self, error: AdapterError) -> AdapterError:
        self._kill()
        return error

    # -- the process ----------------------------------------------------------

    def _spawn(self) -> None:
        self._kill()
        self.starts += 1
        with self.log.open("ab") as log:
            try:
                process = subprocess.Popen(
                    self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                    start_new_session=os.name == "posix")
            except OSError as exc:
                raise StartError(f"{' '.join(self.command)}: {exc}") from None
        self._process = process
        self._lines = queue.Queue()
        assert process.stdout is not None
        threading.Thread(target=_pump, args=(process.stdout, self._lines), daemon=True).start()

    def _kill(self) -> None:
        """Kill the adapter and whatever it started (its process group)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.name == "posix":
                    os.killpg(process.pid, signal.SIGKILL)
                else:
                    process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()

    def _exit_reason(self) -> str:
        """How the adapter ended, and the last line it wrote to stderr."""
        process = self._process
        status = None
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                status = process.wait(1.0)
        text = ""
        if status is not None:
            text = (f" (killed by signal {-status})" if status < 0
                    else f" (exit status {status})")
        last = _last_line(self.log)
        return text + (f"; its stderr ends: {last}" if last else "")


def _pump(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    """Move lines from the adapter's stdout to ``lines``; None marks the end."""
    try:
        while line := stream.readline(MAX_LINE):
            lines.put(line)
    except (OSError, ValueError):
        pass
    finally:
        lines.put(None)


def _response(line: bytes, request_id: int) -> Message:
    if not line.endswith(b"\n"):
        raise ProtocolError(f"response line is unterminated or longer than {MAX_LINE} bytes")
    try:
        response = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"response is not a JSON line ({exc}): {_clip(line)}") from None
    if not isinstance(response, dict) or not isinstance(response.get("result"), str):
        raise ProtocolError(f"response is not an object with a \"result\": {_clip(line)}")
    if response.get("id") != request_id:
        raise ProtocolError(f"response has id {response.get('id')!r}, the request {request_id}")
    return response


def _hello(response: Message) -> Hello:
    if response["result"] != "hello":
        raise ProtocolError(f"hello answered with {response['result']!r}: "
                            f"{response.get('message', response.get('reason', ''))}")
    if response.get("protocol") != PROTOCOL:
        raise ProtocolError(f"adapter speaks protocol {response.get('protocol')!r}, "
                            f"this harness {PROTOCOL}")
    name, version = response.get("name"), response.get("version")
    lists = [response.get(key, []) for key in ("ops", "features")]
    if not isinstance(name, str) or not isinstance(version, str) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in lists):
        raise ProtocolError("hello response needs strings \"name\" and \"version\" and "
                            "lists of strings \"ops\" and \"features\"")
    profiles = response.get("profiles")
    if profiles is not None and not (isinstance(profiles, list) and profiles
                                     and all(isinstance(p, str) for p in profiles)):
        raise ProtocolError("hello's \"profiles\" is a non-empty list of strings when present")
    return Hello(name=name, version=version, protocol=PROTOCOL,
                 ops=tuple(lists[0]), features=tuple(lists[1]),
                 profiles=None if profiles is None else tuple(profiles))


def _last_line(log: Path) -> str:
    try:
        with log.open("rb") as stream:
            stream.seek(max(0, stream.seek(0, os.SEEK_END) - 4096))
            tail = stream.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _clip(line: bytes) -> str:
    text = line.decode("utf-8", "replace").strip()
    return text if len(text) <= 120 else text[:117] + "..."
