"""Judging an adapter's response to a case: pass, fail or skip, and why.

Read cases compare the adapter's answer with the case's expectation. Write
cases read what the adapter wrote with the reference reader (the "blessed
reader" of toml-test) and compare that; merge cases read the checkpoint the
adapter merged in a copy of the case's directory, and check that a failed
merge changed nothing there. Errors compare by category only;
messages are for humans.
"""

from __future__ import annotations

from pathlib import Path

from ocf.conformance import compare, semantics
from ocf.conformance.cases import CATEGORIES, MEANING_KEYS, Case
from ocf.conformance.driver import Message
from ocf.conformance.jsontypes import Json
from ocf.conformance.results import Outcome
from ocf.conformance.written import CHECKS
from ocf.format.commit import is_temp_name
from ocf.format.container import INDEX_FILE_NAME
from ocf.format.errors import OCFError
from ocf.format.reader import Reader

Verdict = tuple[Outcome, str]


def judge(case: Case, response: Message, output: Path | None = None) -> Verdict:
    """The verdict on ``response`` to ``case``; ``output`` is where a write case wrote."""
    result = response["result"]
    if result == "skipped":
        return Outcome.SKIP, _short(response.get("reason")) or "skipped"
    if result == "error":
        verdict = _error(case, response)
        if case.op == "merge" and verdict[0] is Outcome.PASS:
            assert output is not None
            return _unchanged(case, output)
        return verdict
    if result != "ok":
        return Outcome.FAIL, f"unknown result {result!r}"
    if case.expects_error:
        return Outcome.FAIL, (f"expected {case.expect['category']}, but the {case.op} "
                              "succeeded")
    if case.op == "read":
        return _compare(case, response, "the adapter's answer")
    assert output is not None
    if case.op == "merge":
        return _merged(case, output)
    return _written(case, output)


def _error(case: Case, response: Message) -> Verdict:
    category = response.get("category")
    message = _short(response.get("message"))
    if category not in CATEGORIES:
        return Outcome.FAIL, f"error outside the spec's categories ({category!r}): {message}"
    if not case.expects_error:
        return Outcome.FAIL, f"expected success, the adapter reported {category}: {message}"
    if category != case.expect["category"]:
        return Outcome.FAIL, f"expected {case.expect['category']}, got {category}: {message}"
    return Outcome.PASS, ""


def _written(case: Case, output: Path) -> Verdict:
    """Check the layout of what was written, then read it with the reference reader."""
    if case.layout == "file" and not output.is_file():
        return Outcome.FAIL, f"asked for a single-file checkpoint, {_what_is(output)}"
    if case.layout == "directory" and not (output / INDEX_FILE_NAME).is_file():
        return Outcome.FAIL, (f"asked for a directory checkpoint with {INDEX_FILE_NAME}, "
                              f"{_what_is(output)}")
    try:
        with Reader(output) as reader:
            meaning = semantics.describe(reader)
    except OCFError as exc:
        return Outcome.FAIL, f"the reference reader rejects the written checkpoint: {exc}"
    verdict = _compare(case, meaning, "the written checkpoint")
    for name in case.checks if verdict[0] is Outcome.PASS else ():
        reason = CHECKS[name](output)
        if reason is not None:
            return Outcome.FAIL, f"{name}: {reason}"
    return verdict


def _merged(case: Case, output: Path) -> Verdict:
    """The merged checkpoint means what the case expects, and references the parts'
    shard files where they were, unchanged, with no data of its own [R-PART-006]."""
    assert case.input is not None
    if not (output / INDEX_FILE_NAME).is_file():
        return Outcome.FAIL, f"the merge reported success but left no {INDEX_FILE_NAME}"
    try:
        with Reader(output) as reader:
            meaning = semantics.describe(reader)
            shards = [shard.path for shard in reader.index.shards]
    except OCFError as exc:
        return Outcome.FAIL, f"the reference reader rejects the merged checkpoint: {exc}"
    for name in shards:
        original = case.input / name
        if not name or not original.is_file() or \
                original.read_bytes() != (output / name).read_bytes():
            return Outcome.FAIL, (f"the merged index references shard {name!r}, which is not "
                                  "a shard file of the parts, unchanged: tensor bytes were "
                                  "copied or moved")
    return _compare(case, meaning, "the merged checkpoint")


def _unchanged(case: Case, output: Path) -> Verdict:
    """A failed merge left the directory as it was, temporary files aside [R-PART-006]
    [R-PART-007]."""
    assert case.input is not None
    before, after = _files(case.input), _files(output)
    changed = sorted(name for name in before.keys() | after.keys()
                     if before.get(name) != after.get(name))
    if changed:
        return Outcome.FAIL, ("the merge failed as expected but changed the directory: "
                              + ", ".join(changed[:5]))
    return Outcome.PASS, ""


def _files(directory: Path) -> dict[str, bytes]:
    """Every file of ``directory`` but temporary ones and the links a case makes, by
    name, with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())
            if p.is_file() and not p.is_symlink() and not is_temp_name(p.name)}


def _compare(case: Case, actual: Json, what: str) -> Verdict:
    try:
        got = compare.canonical({key: actual.get(key) for key in MEANING_KEYS})
    except ValueError as exc:
        return Outcome.FAIL, f"{what} is not a checkpoint's meaning: {exc}"
    try:
        expected = compare.canonical(case.expect)
    except ValueError as exc:  # a broken case: say so rather than blame the adapter
        return Outcome.FAIL, f"the case's expectation is malformed: {exc}"
    found = compare.difference(expected, got)
    return (Outcome.PASS, "") if found is None else (Outcome.FAIL, f"{what}: {found}")


def _what_is(output: Path) -> str:
    if output.is_dir():
        return f"found a directory without {INDEX_FILE_NAME}"
    return "found a file" if output.exists() else "found nothing"


def _short(item: object) -> str:
    text = "" if item is None else str(item).strip()
    return text if len(text) <= 300 else text[:297] + "..."
