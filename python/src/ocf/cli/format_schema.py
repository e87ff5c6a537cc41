"""The names of the checkpoint formats in the ``--json`` documents, as a JSON Schema
made from the format registry.

Every document of ``ocf inspect``, ``tree``, ``verify`` and ``diff`` with
``--json`` says which format it read (``"format": "safetensors"``: the
Source's ``format_name``, the title of its :class:`ocf.interop.base.Format`).
The schemas of schemas/ refer to one definition of those names,
``format.schema.json``, which is :func:`format_schema` written out, never a
list kept by hand: a format added to :data:`ocf.interop.registry.FORMATS`
reaches every schema when ``python python/tools/gen_cli_schemas.py`` writes
the file again, and the tests fail until it has.
"""

from __future__ import annotations

import json
from typing import Any

from ocf.interop.registry import FORMATS

FILE_NAME = "format.schema.json"
SCHEMA_ID = f"https://ocf.dev/schemas/cli/{FILE_NAME}"


def format_schema() -> dict[str, Any]:
    """The schema of a document's ``format``: one of the registry's format titles.

    Examples:
        >>> "safetensors" in format_schema()["enum"]
        True
    """
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "The format of a checkpoint",
        "description": "The format a --json document read, by the title of its entry in "
                       "OCF's format registry, from which this file is written.",
        "enum": [found.title for found in FORMATS],
    }


def rendered() -> str:
    """:func:`format_schema` as the text of ``format.schema.json``."""
    return json.dumps(format_schema(), indent=2, ensure_ascii=False) + "\n"
