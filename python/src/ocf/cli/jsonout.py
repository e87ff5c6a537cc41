"""``--json`` output: one JSON document on stdout, its shape fixed by a schema.

Each command's document is described by a JSON Schema in ocf/cli/schemas/
(``inspect.schema.json``, ``tree.schema.json``, ``verify.schema.json``,
``diff.schema.json``). A failed command prints ``{"error": {...}}`` (the
category, detail, file, key and requirement of the OCFError), which every
schema allows. Values JSON cannot hold are spelled out: byte strings as
``{"base64": "..."}``, non-finite floats as the strings ``"nan"``,
``"inf"`` and ``"-inf"``.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from importlib import resources
from typing import Any

import numpy as np

from ocf.format.errors import OCFError

SCHEMA_PACKAGE = "ocf.cli.schemas"


def jsonable(value: object) -> Any:
    """``value`` (metadata, a tensor's tolist(), numbers) as plain JSON types."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, complex):
        return {"real": jsonable(value.real), "imag": jsonable(value.imag)}
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def emit(document: dict[str, Any]) -> None:
    json.dump(jsonable(document), sys.stdout, ensure_ascii=False, allow_nan=False)
    sys.stdout.write("\n")


def error_document(exc: OCFError) -> dict[str, Any]:
    return {"error": {"category": exc.label, "detail": exc.detail,
                      "path": None if exc.path is None else str(exc.path),
                      "key": exc.key, "requirement": exc.requirement}}


def schema(command: str) -> dict[str, Any]:
    """The JSON Schema of ``ocf COMMAND --json``'s output."""
    text = resources.files(SCHEMA_PACKAGE).joinpath(f"{command}.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded
