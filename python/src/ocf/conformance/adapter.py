"""The reference implementation's conformance adapter (conformance/protocol.md).

Run as ``python -m ocf.conformance.adapter``: it reads one JSON request per
line on stdin and writes one JSON response per line on stdout until
``bye`` or end of input. Reads go through :class:`ocf.Reader` and
:func:`ocf.conformance.semantics.describe`; writes through
:class:`ocf.Writer` from a write case's source.json; merges through
:func:`ocf.distributed.parts.merge_parts`.

If the environment variable ``OCF_CONFORMANCE_BUG`` names a bug of
:mod:`ocf.conformance.bugs`, that bug is applied before serving, so that
the suite can be tested against a broken implementation.
"""

from __future__ import annotations

import io
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, TextIO

from ocf._version import __version__
from ocf.conformance import bugs, semantics, source
from ocf.conformance.cases import PROFILES
from ocf.distributed.parts import merge_parts
from ocf.format.errors import OCFError
from ocf.format.reader import Reader
from ocf.format.writer import Writer

PROTOCOL = 1
Message = dict[str, Any]


def hello(request: Message) -> Message:
    """Name this implementation; speak protocol 1 to a harness that speaks 1 or later."""
    offered = request.get("protocol")
    if not isinstance(offered, int) or offered < PROTOCOL:
        return _failure(f"this adapter speaks protocol {PROTOCOL}, the harness {offered!r}")
    return {"result": "hello", "name": "ocf-python", "version": __version__,
            "protocol": PROTOCOL, "ops": ["read", "write", "merge"], "features": [],
            "profiles": list(PROFILES)}


def read(request: Message) -> Message:
    """Open the checkpoint, read every tensor and the object graph, describe them."""
    with Reader(request["path"]) as reader:
        reader.check_pool_identities()  # step 16b of a full verification [R-POOL-004]
        return {"result": "ok", **semantics.describe(reader)}


def write(request: Message) -> Message:
    """Write the checkpoint that source.json describes, in the requested layout."""
    described = source.load(Path(request["source"]))
    with Writer(request["output"], layout=request["layout"],
                metadata=described.metadata) as writer:
        for key, array in described.tensors.items():
            writer.write(key, array)
        if described.object_graph is not None:
            writer.set_object_graph(described.object_graph)
    return {"result": "ok"}


def merge(request: Message) -> Message:
    """Merge the parts of a save in place (spec/parts.md)."""
    merge_parts(request["path"], save_id=request["save_id"], parts=request["parts"])
    return {"result": "ok"}


def handle(request: Message) -> Message:
    """The response to one request (without its id)."""
    op = request.get("op")
    try:
        if op == "hello":
            return hello(request)
        if op == "read":
            return read(request)
        if op == "write":
            return write(request)
        if op == "merge":
            return merge(request)
    except OCFError as exc:  # out of memory has no category: it says nothing of the file
        category = None if exc.category is None else exc.category.value
        return {"result": "error", "category": category, "message": str(exc)}
    except Exception as exc:  # not a format error: a bug here, or the environment
        traceback.print_exc()
        return _failure(f"{type(exc).__name__}: {exc}")
    return {"result": "skipped", "reason": f"unknown op {op!r}"}


def _failure(message: str) -> Message:
    """An error outside the spec's categories (protocol.md, "Errors")."""
    return {"result": "error", "category": None, "message": message}


def serve(requests: TextIO, responses: TextIO) -> int:
    """Answer requests until ``bye`` or end of input; the exit status."""
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            print(f"ocf adapter: request is not JSON ({exc}): {line[:200]!r}", file=sys.stderr)
            return 2
        if request.get("op") == "bye":
            return 0
        response = {"id": request.get("id"), **handle(request)}
        responses.write(json.dumps(response) + "\n")
        responses.flush()
    return 0


def main() -> int:
    bug = os.environ.get("OCF_CONFORMANCE_BUG")
    if bug:
        bugs.inject_bug(bug)
    requests = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8")
    responses = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")
    sys.stdout = sys.stderr  # a stray print() must not corrupt the protocol stream
    return serve(requests, responses)


if __name__ == "__main__":
    sys.exit(main())
