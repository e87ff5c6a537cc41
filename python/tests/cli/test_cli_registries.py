"""What the command line lists comes from the registries, so that a format or a codec
added to one cannot be missing from it: the ``format`` of every ``--json`` document
(one definition, written from the format registry by ocf.cli.format_schema) and the
codecs ``ocf convert --compression`` takes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import SCHEMAS
from jsonschema import Draft202012Validator, ValidationError
from referencing import Registry, Resource
from repo_paths import PYTHON_DIR

from ocf.cli.format_schema import FILE_NAME, SCHEMA_ID, format_schema, rendered
from ocf.interop.registry import FORMATS


def schemas() -> dict[str, Any]:
    return {path.name: json.loads(path.read_text()) for path in SCHEMAS.glob("*.schema.json")}


def format_properties(node: object) -> list[object]:
    """Every schema of a property named ``format`` under ``node``."""
    if isinstance(node, list):
        return [found for item in node for found in format_properties(item)]
    if not isinstance(node, dict):
        return []
    found = [node["properties"]["format"]] if "format" in node.get("properties", {}) else []
    return found + [f for value in node.values() for f in format_properties(value)]


def test_the_format_schema_file_is_what_the_registry_gives() -> None:
    assert (SCHEMAS / FILE_NAME).read_text() == rendered(), \
        "format.schema.json is stale: run python python/tools/gen_cli_schemas.py"
    assert format_schema()["enum"] == [found.title for found in FORMATS]


def test_every_command_schema_names_formats_only_through_it() -> None:
    documents = {name: doc for name, doc in schemas().items() if name != FILE_NAME}
    assert set(documents) == {"inspect.schema.json", "tree.schema.json", "verify.schema.json",
                              "diff.schema.json", "error.schema.json"}
    for name, document in documents.items():
        for found in format_properties(document):
            assert found == {"$ref": FILE_NAME}, name
    counted = {name: len(format_properties(doc)) for name, doc in documents.items()}
    assert counted == {"inspect.schema.json": 1, "tree.schema.json": 1,
                       "verify.schema.json": 1, "diff.schema.json": 2, "error.schema.json": 0}


def test_every_registered_format_is_a_valid_format_and_another_name_is_not() -> None:
    resources = [(doc["$id"], Resource.from_contents(doc)) for doc in schemas().values()]
    registry: Registry = Registry().with_resources(resources)
    validator = Draft202012Validator({"$ref": SCHEMA_ID}, registry=registry)
    for found in FORMATS:
        validator.validate(found.title)
    with pytest.raises(ValidationError):
        validator.validate("pickle")


def test_the_tool_writes_the_file_and_checks_it(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(PYTHON_DIR / "tools"))
    try:
        import gen_cli_schemas
    finally:
        sys.path.remove(str(PYTHON_DIR / "tools"))
    target = tmp_path / FILE_NAME
    monkeypatch.setattr(gen_cli_schemas, "SCHEMA_FILE", target)
    monkeypatch.setattr(sys, "argv", ["gen_cli_schemas.py", "--check"])
    assert gen_cli_schemas.main() == 1  # missing
    monkeypatch.setattr(sys, "argv", ["gen_cli_schemas.py"])
    assert gen_cli_schemas.main() == 0
    assert target.read_text() == rendered()
    monkeypatch.setattr(sys, "argv", ["gen_cli_schemas.py", "--check"])
    assert gen_cli_schemas.main() == 0


def test_convert_takes_every_codec_of_the_codec_registry() -> None:
    from cli_support import run

    from ocf.format.codecs.registry import CODECS

    done = run("convert", "--help")
    assert done.returncode == 0, done.stderr
    listed = "{" + ",".join(codec.name for codec in CODECS) + "}"
    assert f"--compression {listed}" in " ".join(done.stdout.split())
