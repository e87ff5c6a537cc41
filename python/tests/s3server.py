"""A real S3-compatible server on loopback for the tests: moto in server mode.

One server runs per test session (fixture ``s3_server`` in conftest.py); each
test that wants a clean store takes ``s3_bucket``, a new bucket. The server
is a separate process speaking HTTP: the code under test goes through s3fs
and botocore exactly as it would against AWS.

Child processes reach the same store through environment variables
(:attr:`S3Server.env`): fsspec reads ``FSSPEC_S3`` (a JSON object of
s3fs options) whenever it creates an S3 filesystem, so a child needs no
storage_options at all.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Dummy credentials: moto accepts any, botocore insists on some.
_KEY, _SECRET = "ocf-test-key", "ocf-test-secret"
_bucket_numbers = itertools.count()


@dataclass
class S3Server:
    """A running moto server: its endpoint and how to reach it."""

    endpoint: str
    process: subprocess.Popen[bytes]
    log: Path
    _fs: Any = field(default=None, repr=False)

    @property
    def storage_options(self) -> dict[str, Any]:
        """Options for ``fsspec.filesystem("s3", ...)`` and ocf's ``storage_options``."""
        return {"endpoint_url": self.endpoint, "key": _KEY, "secret": _SECRET}

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point a child process's fsspec at this server."""
        return {"FSSPEC_S3": json.dumps(self.storage_options),
                "AWS_ACCESS_KEY_ID": _KEY, "AWS_SECRET_ACCESS_KEY": _SECRET,
                "AWS_DEFAULT_REGION": "us-east-1"}

    @property
    def fs(self) -> Any:
        """An s3fs filesystem on this server, for test set-up and inspection."""
        if self._fs is None:
            import fsspec

            self._fs = fsspec.filesystem("s3", skip_instance_cache=True,
                                         **self.storage_options)
        return self._fs

    def new_bucket(self) -> str:
        """Create a new, empty bucket; its name."""
        name = f"ocf-test-{os.getpid()}-{next(_bucket_numbers)}"
        self.fs.mkdir(name)
        return name


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(endpoint, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # it answered, if only with an error
    except OSError:
        return False


def start_server(log: Path, timeout: float = 60.0) -> S3Server:
    """Start ``python -m moto.server`` on a free loopback port; wait until it answers."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while not _answers(endpoint):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"moto server did not start on {endpoint}: "
                               f"{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.1)
    return S3Server(endpoint, process, log)


def stop_server(server: S3Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def requests_since(server: S3Server, offset: int, at_least: int) -> list[str]:
    """"METHOD /path?query" of every request the server logged after byte ``offset`` of
    its log (``server.log.stat().st_size`` before the requests).

    The server logs a request just after answering it: waits for ``at_least``.
    """
    deadline = time.monotonic() + 5
    while True:
        with server.log.open("rb") as log:
            log.seek(offset)
            lines = log.read().decode(errors="replace").splitlines()
        requests = [m.group(1) for m in map(_REQUEST.search, lines) if m]
        if len(requests) >= at_least or time.monotonic() > deadline:
            return requests
        time.sleep(0.05)


_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+ \S+) HTTP/')


def serve(log: Path) -> Iterator[S3Server]:
    """The body of the session fixture: a server for the whole session."""
    server = start_server(log)
    try:
        yield server
    finally:
        stop_server(server)
