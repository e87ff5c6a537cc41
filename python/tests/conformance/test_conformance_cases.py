"""The conformance cases (conformance/cases) against their generators, the spec and
the reference implementation.

- conformance/tools/trace.py passes: every MUST requirement of spec/ has a case
  (or is listed in conformance/untestable.txt with a reason), every case cites
  defined requirements and follows the case format; and trace.py itself finds
  each kind of problem it is meant to find.
- conformance/generate/generate_all.py rebuilds exactly the committed cases.
- The reference reader gives every read case's expected result, and the
  reference writer every write case's. The expectations were computed by the
  generators from what they put into the files, not by this implementation,
  so a disagreement is a bug on one side: cases the reference gets wrong are
  listed in KNOWN_REFERENCE_FAILURES (strict xfail, so the list cannot go stale).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from repo_paths import REPOSITORY

import ocf
from ocf.conformance.cases import CaseError, load_case, materialize
from ocf.conformance.semantics import describe
from ocf.distributed.parts import merge_parts
from ocf.format import dtypes
from ocf.format.errors import OCFError
from ocf.format.object_graph import Node, SlotRef

REPO = REPOSITORY
CONFORMANCE = REPO / "conformance"
CASES = CONFORMANCE / "cases"

# Cases the reference implementation does not pass, with the reason: none.
KNOWN_REFERENCE_FAILURES: dict[str, str] = {}


def _load_trace() -> ModuleType:
    # Loaded under its own name: "trace" is also a module of the standard library.
    spec = importlib.util.spec_from_file_location("ocf_conformance_trace",
                                                  CONFORMANCE / "tools" / "trace.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


trace = _load_trace()


def _cases(op: str) -> list[Any]:
    found = []
    for path in sorted(CASES.glob("*/*/case.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        if case["op"] != op:
            continue
        marks = []
        if case["id"] in KNOWN_REFERENCE_FAILURES:
            marks.append(pytest.mark.xfail(reason=KNOWN_REFERENCE_FAILURES[case["id"]],
                                           strict=True))
        found.append(pytest.param(path.parent, case, id=case["id"], marks=marks))
    return found


READ_CASES = _cases("read")
WRITE_CASES = _cases("write")
MERGE_CASES = _cases("merge")


# -- traceability ------------------------------------------------------------------------------


def test_every_must_requirement_has_a_case_and_every_case_is_well_formed() -> None:
    report, summary = trace.trace(REPO / "spec", CASES, CONFORMANCE / "untestable.txt")
    assert report.problems == [], summary
    assert summary.endswith("OK")


def test_trace_command_exits_0_and_prints_a_summary() -> None:
    done = subprocess.run([sys.executable, str(CONFORMANCE / "tools" / "trace.py")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("trace: ")


def test_suite_has_every_kind_of_case() -> None:
    categories = {case.values[1]["expect"].get("category") for case in READ_CASES}
    assert categories - {None} == {"MALFORMED", "INVALID", "UNSUPPORTED_VERSION",
                                   "UNKNOWN_REQUIRED_FEATURE", "INTEGRITY", "LIMIT_EXCEEDED",
                                   "NOT_FOUND"}
    assert len(WRITE_CASES) >= 4
    merge_categories = {case.values[1]["expect"].get("category") for case in MERGE_CASES}
    assert {None, "NOT_FOUND", "INVALID", "INTEGRITY"} <= merge_categories
    size = sum(p.stat().st_size for p in CASES.rglob("*") if p.is_file())
    # Tensors stay tiny; the largest case is a 100,000-node graph (about 1.1 MB, linear
    # graph handling is what it tests), then those of more than 4096 slices (format 1.2),
    # at least 64 bytes a slice by the block alignment [R-DATA-001]: about 340 KB each.
    # The whole suite fits in 4 MiB.
    assert size < 4 << 20, f"conformance/cases holds {size} bytes; keep tensors tiny"


def _copy_case(tmp_path: Path, case_id: str) -> Path:
    group, name = case_id.split(".", 1)
    target = tmp_path / "cases" / group / name
    shutil.copytree(CASES / group / name, target)
    return target


def _problems(tmp_path: Path, untestable: str | None = None) -> list[str]:
    listing = tmp_path / "untestable.txt"
    if untestable is not None:
        listing.write_text(untestable)
    report, _ = trace.trace(REPO / "spec", tmp_path / "cases", listing)
    return list(report.problems)


def _edit(case_dir: Path, change: Any) -> None:
    path = case_dir / "case.json"
    case = json.loads(path.read_text())
    change(case)
    path.write_text(json.dumps(case))


def test_trace_lists_must_requirements_without_cases(tmp_path: Path) -> None:
    _copy_case(tmp_path, "reject.file.preamble-magic")
    problems = _problems(tmp_path)
    assert not any("R-FILE-002 " in p for p in problems)
    assert any(p.startswith("R-GRAPH-004 ") and "without a case" in p for p in problems)


def test_trace_lists_unknown_requirement_ids(tmp_path: Path) -> None:
    case = _copy_case(tmp_path, "reject.file.preamble-magic")
    _edit(case, lambda c: c["requirements"].append("R-FILE-999"))
    assert any("cites R-FILE-999" in p for p in _problems(tmp_path))


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c.update(extra=1), "unknown keys ['extra']"),
    (lambda c: c.pop("description"), "missing keys ['description']"),
    (lambda c: c.update(level="mandatory"), "level 'mandatory'"),
    (lambda c: c["expect"].update(category="BROKEN"), "category 'BROKEN'"),
    (lambda c: c.update(input="nowhere.ocf"), "input 'nowhere.ocf' does not exist"),
    (lambda c: c.update(input="../../x"), "is not a relative path in the case"),
    (lambda c: c.update(id="reject.file.other"), "does not match its directory"),
    (lambda c: c.update(expect={"result": "ok"}), "expect of an ok result"),
])
def test_trace_lists_malformed_case_files(tmp_path: Path, change: Any, message: str) -> None:
    case = _copy_case(tmp_path, "reject.file.preamble-magic")
    _edit(case, change)
    assert any(message in p for p in _problems(tmp_path)), _problems(tmp_path)


LINKED = "reject.shard.symlink-to-valid-shard"


@pytest.mark.parametrize(("links", "message"), [
    ({"checkpoint/index.ocf": "../elsewhere/data-0.ocfd"}, "is not a new relative name"),
    ({"/tmp/x": "../elsewhere/data-0.ocfd"}, "is not a new relative name"),
    ({"checkpoint/data-0.ocfd": "/etc/passwd"}, "points outside the case"),
    ({"checkpoint/data-0.ocfd": "../../../x"}, "points outside the case"),
    # A target inside the case that does not exist is allowed: a dangling link is a case
    # (reject.path.index-is-a-dangling-symlink).
])
def test_links_that_leave_the_case_or_replace_its_files_are_refused(
        tmp_path: Path, links: dict[str, str], message: str) -> None:
    case = _copy_case(tmp_path, LINKED)
    _edit(case, lambda c: c.update(links=links))
    assert any(message in p for p in _problems(tmp_path)), _problems(tmp_path)
    with pytest.raises(CaseError, match="link"):
        load_case(case / "case.json")


def test_a_declared_link_is_made_in_a_copy_and_the_file_it_points_to_is_referenced(
        tmp_path: Path) -> None:
    case_dir = _copy_case(tmp_path, LINKED)
    assert not any(LINKED in p for p in _problems(tmp_path))  # elsewhere/ counts as used
    case = load_case(case_dir / "case.json")
    path = materialize(case, tmp_path / "work")
    link = path / "data-0.ocfd"
    assert link.is_symlink()
    assert os.readlink(link) == "../elsewhere/data-0.ocfd"
    assert link.read_bytes() == (case_dir / "elsewhere" / "data-0.ocfd").read_bytes()
    assert not (case_dir / "checkpoint" / "data-0.ocfd").exists()  # the case is untouched


def test_trace_lists_missing_and_stray_files_of_write_cases(tmp_path: Path) -> None:
    case = _copy_case(tmp_path, "write.every-dtype")
    (case / "data" / "000.bin").unlink()
    (case / "stray.bin").write_bytes(b"")
    problems = _problems(tmp_path)
    assert any("data file 'data/000.bin' is missing" in p for p in problems)
    assert any("stray.bin is not referenced" in p for p in problems)


def test_trace_checks_the_untestable_list(tmp_path: Path) -> None:
    _copy_case(tmp_path, "reject.file.preamble-magic")
    problems = _problems(tmp_path, "R-FILE-002  covered anyway\nR-FILE-999  no such id\n"
                                   "not a line\n")
    assert any("R-FILE-002 is covered by 1 case(s)" in p for p in problems)
    assert any("R-FILE-999 is not defined" in p for p in problems)
    assert any("expected 'R-XXX-NNN justification'" in p for p in problems)


def test_trace_refuses_a_required_case_citing_only_weaker_requirements(tmp_path: Path) -> None:
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "a.md").write_text("**[R-X-001]** A reader SHOULD do this.\n\n"
                               "- **[R-X-002]** A writer MUST do that,\n  on two lines.\n")
    defined, problems = trace.requirements(spec)
    assert problems == []
    assert (defined["R-X-001"].strength, defined["R-X-002"].strength) == ("SHOULD", "MUST")


# -- the generators ----------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, bytes]:
    """Every file by relative name; a symbolic link (a case may hold one) as its target."""
    return {str(p.relative_to(root)):
            b"symlink to " + str(p.readlink()).encode() if p.is_symlink() else p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_symlink() or p.is_file()}


def test_generators_rebuild_exactly_the_committed_cases(tmp_path: Path) -> None:
    out = tmp_path / "cases"
    done = subprocess.run([sys.executable, str(CONFORMANCE / "generate" / "generate_all.py"),
                           "--out", str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rebuilt, committed = _tree(out), _tree(CASES)
    assert sorted(rebuilt) == sorted(committed), "run conformance/generate/generate_all.py"
    changed = [name for name in rebuilt if rebuilt[name] != committed[name]]
    assert changed == [], "run conformance/generate/generate_all.py"


# -- the reference implementation against the cases ----------------------------------------------


def read_result(path: Path) -> dict[str, Any]:
    """What a conformance driver reports for a read: a full verification (the index,
    the pool objects' identities, the object graph, then every tensor in table order),
    then the description."""
    try:
        with ocf.Reader(path) as reader:
            reader.verify_all()
            return {"result": "ok", **describe(reader)}
    except OCFError as exc:
        return {"result": "error", "category": exc.label}


@pytest.mark.parametrize(("case_dir", "case"), READ_CASES)
def test_reference_reader_gives_the_expected_result(tmp_path: Path, case_dir: Path,
                                                    case: dict[str, Any]) -> None:
    got = read_result(materialize(load_case(case_dir / "case.json"), tmp_path))
    expected = case["expect"]
    if expected["result"] == "error":
        assert got == expected, f"{case['id']}: {case['description']}"
    else:
        assert got["result"] == "ok", f"{case['id']}: {got}"
        for part in ("tensors", "metadata", "object_graph"):
            assert got[part] == expected[part], f"{case['id']}: {part} differ"


def _array(case_dir: Path, tensor: dict[str, Any]) -> np.ndarray:
    raw = (case_dir / tensor["data"]).read_bytes()
    shape = tuple(tensor["shape"])
    info = dtypes.BY_NAME[tensor["dtype"]]
    if info.numpy is None:
        count = int(np.prod(shape, dtype=np.int64))
        lengths = np.frombuffer(raw[:8 * count], dtype="<u8").tolist()
        out = np.empty(count, dtype=object)
        at = 8 * count
        for k, length in enumerate(lengths):
            out[k] = raw[at:at + length]
            at += length
        return out.reshape(shape)
    return np.frombuffer(raw, dtype=info.numpy).reshape(shape)


def _value(typed: Any) -> Any:
    if typed is None:
        return None
    ((kind, item),) = typed.items()
    return {
        "int": lambda: int(item),
        "float": lambda: float.fromhex(item),
        "bytes": lambda: base64.b64decode(item),
        "list": lambda: [_value(v) for v in item],
        "map": lambda: {k: _value(v) for k, v in item.items()},
    }.get(kind, lambda: item)()


def _node(node: dict[str, Any]) -> Node:
    return Node(children=dict(node["children"]), attributes=dict(node["attributes"]),
                slots=[SlotRef(*slot) for slot in node["slot_variables"]],
                type_name=node["type_name"],
                metadata={k: _value(v) for k, v in node["metadata"].items()})


@pytest.mark.parametrize(("case_dir", "case"), WRITE_CASES)
def test_reference_writer_gives_the_expected_result(tmp_path: Path, case_dir: Path,
                                                    case: dict[str, Any]) -> None:
    source = json.loads((case_dir / case["source"]).read_text(encoding="utf-8"))
    target = tmp_path / ("written.ocf" if case["layout"] == "file" else "written")
    metadata = {k: _value(v) for k, v in source["metadata"].items()}
    with ocf.Writer(target, layout=case["layout"], metadata=metadata) as writer:
        for key, tensor in source["tensors"].items():
            writer.write(key, _array(case_dir, tensor))
        if source["object_graph"] is not None:
            writer.set_object_graph([_node(n) for n in source["object_graph"]["nodes"]])
    assert read_result(target) == case["expect"]


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.parametrize(("case_dir", "case"), MERGE_CASES)
def test_reference_merge_gives_the_expected_result(tmp_path: Path, case_dir: Path,
                                                   case: dict[str, Any]) -> None:
    """Merge a copy of the parts; a failed merge must leave the copy as it was."""
    directory = tmp_path / "parts"
    shutil.copytree(case_dir / case["input"], directory)
    before = _files(directory)
    got: dict[str, Any] = {"result": "ok"}
    try:
        merge_parts(directory, save_id=case["save_id"], parts=case["parts"])
    except OCFError as exc:
        got = {"result": "error", "category": exc.label}
    if case["expect"]["result"] == "error":
        assert got == case["expect"]
        assert _files(directory) == before, "a failed merge changed the directory"
        return
    assert got == {"result": "ok"}
    assert read_result(directory) == case["expect"]
    with ocf.Reader(directory) as reader:
        for shard in reader.index.shards:  # referenced in place, not copied
            assert before[shard.path] == (directory / shard.path).read_bytes()


def test_trace_refuses_source_keys_that_are_not_the_derived_ones() -> None:
    nodes = [{"children": [["dense", 1]], "attributes": [["step", ".step"]],
              "slot_variables": []},
             {"children": [], "attributes": [["kernel", "dense/kernel"]], "slot_variables": []}]
    assert trace._underived_keys(nodes) == [
        "source node 1 attribute 'kernel' names 'dense/kernel', not the derived key "
        "'dense/.kernel'"]
    nodes[1]["attributes"] = [["kernel", "dense/.kernel"]]
    assert trace._underived_keys(nodes) == []
