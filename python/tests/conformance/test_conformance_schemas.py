"""The JSON Schemas of the conformance kit (conformance/schemas/) against what the
reference harness sends and the reference adapter answers, and against every
case.json and source.json of the suite.

The messages are the real ones: each request is what ``harness.request_for``
builds for a committed case, and each response what the reference adapter's
``handle`` answers to it, so a schema that drifts from the protocol as
implemented fails here. A few hand-made wrong messages show that the schemas
refuse what the protocol forbids.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from referencing import Registry, Resource
from repo_paths import REPOSITORY

from ocf.conformance import adapter, harness, semantics
from ocf.conformance.cases import Case, load_cases
from ocf.format.reader import Reader

REPO = REPOSITORY
SCHEMAS = REPO / "conformance" / "schemas"
CASES = REPO / "conformance" / "cases"


def _registry() -> Registry:
    resources = []
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


REGISTRY = _registry()


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, registry=REGISTRY)


REQUEST, RESPONSE = validator("request"), validator("response")


def _errors(check: jsonschema.Draft202012Validator, message: Any) -> list[str]:
    return [error.message for error in check.iter_errors(message)]


def test_every_case_json_and_source_json_of_the_suite_is_valid() -> None:
    cases, sources = validator("case"), validator("source")
    paths = sorted(CASES.glob("*/*/case.json"))
    assert len(paths) > 400
    for path in paths:
        assert _errors(cases, json.loads(path.read_text(encoding="utf-8"))) == [], path
    for path in sorted(CASES.glob("write/*/source.json")):
        assert _errors(sources, json.loads(path.read_text(encoding="utf-8"))) == [], path


# One committed case of every kind of exchange: ok and error reads, a write, merges
# that succeed and fail, a read of an object graph and of every metadata kind.
EXCHANGES = ["read.spec.appendix-a", "read.meta.every-kind", "read.graph.example",
             "reject.crc.data-byte-changed", "write.object-graph",
             "merge.four-parts", "merge.missing-part", "merge.arguments.part-count-zero"]


def _case(case_id: str) -> Case:
    [case] = load_cases(CASES, [case_id])
    return case


@pytest.mark.parametrize("case_id", EXCHANGES)
def test_requests_and_responses_of_the_reference_match_the_schemas(
        case_id: str, tmp_path: Path) -> None:
    request, _ = harness.request_for(_case(case_id), tmp_path)
    request["id"] = 7
    assert _errors(REQUEST, request) == []
    response = {"id": 7, **adapter.handle(request)}
    assert response["result"] in ("ok", "error")
    assert _errors(RESPONSE, response) == []


def test_hello_bye_and_skipped_match_the_schemas() -> None:
    hello = {"id": 1, "op": "hello", "protocol": 1}
    assert _errors(REQUEST, hello) == []
    assert _errors(RESPONSE, {"id": 1, **adapter.handle(hello)}) == []
    assert _errors(REQUEST, {"id": 2, "op": "bye"}) == []
    unknown = {"id": 3, "op": "frobnicate"}
    assert _errors(RESPONSE, {"id": 3, **adapter.handle(unknown)}) == []


@pytest.mark.parametrize("wrong", [
    {"id": 1, "result": "error", "message": "no category"},
    {"id": 1, "result": "error", "category": "BROKEN", "message": "unknown category"},
    {"id": 1, "result": "ok", "tensors": {}, "metadata": {"lr": {"float": "0.001"}},
     "object_graph": None},  # a decimal float string: only hexadecimal floats are exact
    {"id": 1, "result": "ok", "tensors": {"w": {"dtype": "float32", "shape": [2.5],
                                                "sha256": "0" * 64}},
     "metadata": {}, "object_graph": None},
    {"id": 1, "result": "ok", "tensors": {}, "metadata": {"n": {"int": 7}},
     "object_graph": None},
    {"id": 1, "result": "hello", "name": "x", "version": "1", "protocol": 1,
     "ops": ["read"], "features": [], "profiles": ["everything"]},
])
def test_the_response_schema_refuses_what_the_protocol_forbids(wrong: dict[str, Any]) -> None:
    assert _errors(RESPONSE, wrong) != []


def test_the_request_schema_refuses_a_request_without_its_fields() -> None:
    assert _errors(REQUEST, {"id": 1, "op": "read", "case": "x"}) != []
    assert _errors(REQUEST, {"id": 1, "op": "write", "case": "x", "source": "s",
                             "output": "o", "layout": "zip"}) != []


# -- the reference digests of conformance/protocol.md, "Tensors" ---------------------------


def _reference_digests() -> list[tuple[str, bytes, str]]:
    """(tensor, canonical bytes, sha256) rows of the table in protocol.md."""
    text = (REPO / "conformance" / "protocol.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([^|]+) \| `([0-9a-f ]+)` \| `([0-9a-f]{64})` \|$", text, re.M)
    return [(name.strip(), bytes.fromhex(data), digest) for name, data, digest in rows]


def test_the_reference_digests_of_the_protocol_are_right() -> None:
    rows = _reference_digests()
    assert [name for name, _, _ in rows] == ['float32 `[2, 2]`, `[[1, 2], [3, 4]]`',
                                             'bytes `[2]`, `[b"a", b"bc"]`']
    for _, data, digest in rows:
        assert hashlib.sha256(data).hexdigest() == digest
    kernel = np.array([[1, 2], [3, 4]], dtype=np.float32)
    strings = np.array([b"a", b"bc"], dtype=object)
    assert [semantics.tensor(kernel)["sha256"], semantics.tensor(strings)["sha256"]] == \
        [digest for _, _, digest in rows]
    with Reader(REPO / "spec" / "examples" / "directory") as reader:
        assert semantics.describe(reader)["tensors"]["kernel"] == {  # type: ignore[index]
            "dtype": "float32", "shape": [2, 2], "sha256": rows[0][2]}
