"""The conformance harness, its driver protocol and the reference adapter.

Each test builds a small suite of its own in tmp_path (not the real one in
conformance/cases) and runs the harness against real adapter processes:
the reference adapter, the POSIX shell adapter, and tiny Python adapters
that hang, crash or break the protocol.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from repo_paths import REPOSITORY

import ocf
from ocf.conformance import adapter, compare, harness, semantics, source
from ocf.format.metadata import MetadataValue
from ocf.format.raw import encode_strings

REPO = REPOSITORY
SKIP_ALL = REPO / "conformance" / "adapters" / "skip_all.sh"

# A Python adapter that answers like the reference one, except for cases
# whose id contains "hang" (it never answers), "crash" (it exits with status
# 3 after a line on stderr) or "junk" (it answers with a line that is not JSON).
MISBEHAVING = """
import json, sys, time
from ocf.conformance import adapter
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "bye":
        break
    case = request.get("case", "")
    if "hang" in case:
        time.sleep(3600)
    if "crash" in case:
        print("adapter: about to crash", file=sys.stderr, flush=True)
        sys.exit(3)
    if "junk" in case:
        print("this is not json", flush=True)
        continue
    print(json.dumps({"id": request["id"], **adapter.handle(request)}), flush=True)
"""

# A Python adapter whose hello answer is the reference's updated with $HELLO (by
# default it declares only "read"), and which refuses any op it did not declare:
# cases of undeclared ops (or profiles) must never be sent to it.
HELLO_FROM_ENV = """
import json, os, sys
from ocf.conformance import adapter
declared, ops = json.loads(os.environ.get("HELLO", '{"ops": ["read"]}')), []
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "bye":
        break
    response = adapter.handle(request)
    if request["op"] == "hello":
        response.update(declared)
        ops = response["ops"]
    elif request["op"] not in ops:
        response = {"result": "error", "category": None, "message": request["op"] + " was sent"}
    print(json.dumps({"id": request["id"], **response}), flush=True)
"""

# A Python adapter that writes a single file when asked for a directory.
WRONG_LAYOUT = """
import json, sys
from ocf.conformance import adapter
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "bye":
        break
    if request["op"] == "write":
        request["layout"] = "file"
    print(json.dumps({"id": request["id"], **adapter.handle(request)}), flush=True)
"""


# -- building a small suite ----------------------------------------------------

def _case_dir(cases: Path, case_id: str) -> Path:
    directory = cases / case_id.split(".", 1)[0] / case_id
    directory.mkdir(parents=True)
    return directory


def _write_case_json(directory: Path, case_id: str, level: str, requirements: list[str],
                     **fields: Any) -> None:
    case = {"id": case_id, "level": level, "requirements": requirements,
            "description": f"test case {case_id}", **fields}
    (directory / "case.json").write_text(json.dumps(case, indent=1))


def read_case(cases: Path, case_id: str, level: str = "required") -> Path:
    """A checkpoint with a float tensor, byte strings and typed metadata, and its meaning."""
    directory = _case_dir(cases, case_id)
    path = directory / "input.ocf"
    ocf.save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3),
                   "s": np.array([b"a", b"bc"], dtype=object)},
                  path, metadata={"epoch": 3, "lr": 0.5, "tag": b"\x00\xff"})
    with ocf.Reader(path) as reader:
        expect = {"result": "ok", **semantics.describe(reader)}
    _write_case_json(directory, case_id, level, ["R-DTYPE-001", "R-META-001"], op="read",
                     input="input.ocf", expect=expect)
    return directory


def reject_case(cases: Path, case_id: str, level: str = "required") -> Path:
    directory = _case_dir(cases, case_id)
    (directory / "input.ocf").write_bytes(b"not a checkpoint")
    _write_case_json(directory, case_id, level, ["R-FILE-004"], op="read", input="input.ocf",
                     expect={"result": "error", "category": "MALFORMED"})
    return directory


def write_case(cases: Path, case_id: str, level: str = "required",
               layout: str = "directory") -> Path:
    """A source.json with an object graph; the expectation comes from the reference writer."""
    directory = _case_dir(cases, case_id)
    kernel = np.arange(4, dtype="<f4").reshape(2, 2)
    names = np.array([[b"x"], [b""]], dtype=object)
    (directory / "kernel.bin").write_bytes(kernel.tobytes())
    (directory / "names.bin").write_bytes(encode_strings(names))
    metadata: dict[str, MetadataValue] = {"step": 7, "name": "run",
                                         "nested": {"a": [1.5, None, True]}}
    graph = {"nodes": [
        {"type_name": "Model", "children": [["dense", 1]], "attributes": [],
         "slot_variables": [], "metadata": {}},
        {"type_name": "Dense", "children": [],
         "attributes": [["kernel", "dense/.kernel"], ["names", "dense/.names"]],
         "slot_variables": [], "metadata": semantics.metadata({"units": 2})},
    ]}
    described = {"tensors": {"dense/.kernel": {"dtype": "float32", "shape": [2, 2],
                                               "data": "kernel.bin"},
                             "dense/.names": {"dtype": "bytes", "shape": [2, 1],
                                              "data": "names.bin"}},
                 "metadata": semantics.metadata(metadata), "object_graph": graph}
    (directory / "source.json").write_text(json.dumps(described))
    reference = directory.parent / f"{case_id}.reference"
    loaded = source.load(directory / "source.json")
    with ocf.Writer(reference, layout="directory", metadata=loaded.metadata) as writer:
        for key, array in loaded.tensors.items():
            writer.write(key, array)
        writer.set_object_graph(loaded.object_graph or [])
    with ocf.Reader(reference) as reader:
        expect = {"result": "ok", **semantics.describe(reader)}
    shutil.rmtree(reference)
    _write_case_json(directory, case_id, level, ["R-GRAPH-007"], op="write",
                     source="source.json", layout=layout, expect=expect)
    return directory


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """One passing case of each kind: read, reject, write."""
    cases = tmp_path / "cases"
    read_case(cases, "read.basic")
    reject_case(cases, "reject.truncated")
    write_case(cases, "write.graph")
    return cases


def script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "adapter_script.py"
    path.write_text(text)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def run(capsys: pytest.CaptureFixture[str], cases: Path, *args: str) -> tuple[int, str]:
    status = harness.main(["--cases", str(cases), *args])
    return status, capsys.readouterr().out


def outcomes(jsonl: Path) -> dict[str, str]:
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    return {r["id"]: r["outcome"] for r in records if r["record"] == "case"}


def counts(out: str, group: str, level: str) -> list[int]:
    """pass, fail, xfail, skip, stale of one row of the results table."""
    for line in out.splitlines():
        cells = line.split()
        if cells[:2] == [group, level]:
            return [int(c) for c in cells[2:]]
    raise AssertionError(f"no row {group} {level} in:\n{out}")


# -- the reference adapter -----------------------------------------------------

def test_reference_adapter_passes_read_reject_and_write_cases(
        suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run(capsys, suite)
    assert status == 0, out
    assert counts(out, "read", "required") == [1, 0, 0, 0, 0]
    assert counts(out, "reject", "required") == [1, 0, 0, 0, 0]
    assert counts(out, "write", "required") == [1, 0, 0, 0, 0]
    assert out.splitlines()[0].startswith("OCF conformance: ocf-python ")
    assert out.splitlines()[-1] == "RESULT: CONFORMANT"


def test_a_wrong_answer_fails_with_its_requirements_and_where_it_differs(
        suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case_json = suite / "read" / "read.basic" / "case.json"
    case = json.loads(case_json.read_text())
    case["expect"]["tensors"]["w"]["sha256"] = "0" * 64
    case_json.write_text(json.dumps(case))
    status, out = run(capsys, suite)
    assert status == 1
    [line] = [x for x in out.splitlines() if x.startswith("FAIL")]
    assert "read.basic (required) [R-DTYPE-001, R-META-001]" in line
    assert '["tensors"]["w"]["sha256"]: expected "0000' in line
    assert out.splitlines()[-1] == "RESULT: NOT CONFORMANT (1 required case failed)"


def test_a_reject_case_read_successfully_or_with_another_category_fails(
        suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case_json = suite / "reject" / "reject.truncated" / "case.json"
    case = json.loads(case_json.read_text())
    case["expect"]["category"] = "INTEGRITY"
    case_json.write_text(json.dumps(case))
    read_input = suite / "read" / "read.basic" / "input.ocf"
    shutil.copy(read_input, suite / "reject" / "reject.truncated" / "good.ocf")
    _write_case_json(suite / "reject" / "reject.truncated", "reject.truncated", "required",
                     ["R-FILE-004"], op="read", input="good.ocf", expect=case["expect"])
    status, out = run(capsys, suite, "--filter", "reject.*")
    assert status == 1
    assert "expected INTEGRITY, but the read succeeded" in out
    (suite / "reject" / "reject.truncated" / "case.json").write_text(json.dumps(case))
    status, out = run(capsys, suite, "--filter", "reject.*")
    assert "expected INTEGRITY, got MALFORMED: MALFORMED:" in out


def test_a_write_in_the_wrong_layout_fails(
        suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run(capsys, suite, "--impl", script(tmp_path, WRONG_LAYOUT))
    assert status == 1
    assert "write.graph (required) [R-GRAPH-007]: asked for a directory checkpoint" in out
    assert counts(out, "read", "required") == [1, 0, 0, 0, 0]


def test_an_adapter_without_write_has_write_cases_skipped_unsent(
        suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run(capsys, suite, "--impl", script(tmp_path, HELLO_FROM_ENV))
    assert status == 1
    assert counts(out, "write", "required") == [0, 0, 0, 1, 0]
    assert "SKIP  write.graph (required) [R-GRAPH-007]: the adapter does not implement 'write'" \
        in out
    assert out.splitlines()[-1] == "RESULT: NOT CONFORMANT (1 required case skipped)"


# -- other adapters: shell, hanging, crashing, broken --------------------------

def test_the_shell_adapter_that_skips_everything_is_not_conformant(
        suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reject_case(suite, "reject.optional-thing", level="optional")
    status, out = run(capsys, suite, "--impl", f"sh {shlex.quote(str(SKIP_ALL))}")
    assert status == 1
    assert out.splitlines()[0].startswith("OCF conformance: skip-all-shell 1.0 (protocol 1")
    assert counts(out, "read", "required") == [0, 0, 0, 1, 0]
    assert counts(out, "reject", "optional") == [0, 0, 0, 1, 0]
    assert "reject.optional-thing" not in out.split("\n\n")[2]  # an optional skip is no problem
    assert out.splitlines()[-1] == "RESULT: NOT CONFORMANT (3 required cases skipped)"


def test_a_hanging_adapter_is_timed_out_restarted_and_the_next_case_runs(
        suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(suite / "read" / "read.basic", suite / "read" / "read.hang")
    case_json = suite / "read" / "read.hang" / "case.json"
    case_json.write_text(case_json.read_text().replace('"read.basic"', '"read.hang"'))
    jsonl = tmp_path / "results.jsonl"
    status, out = run(capsys, suite, "--impl", script(tmp_path, MISBEHAVING),
                      "--timeout", "2", "--jsonl", str(jsonl))
    assert status == 1
    assert "FAIL  read.hang (required) [R-DTYPE-001, R-META-001]: timeout: no response " \
           "within 2 s" in out
    assert outcomes(jsonl) == {"read.basic": "pass", "read.hang": "fail",
                               "reject.truncated": "pass", "write.graph": "pass"}
    assert "1 adapter restart(s)" in out.splitlines()[0]


def test_a_crashing_adapter_is_restarted_and_its_stderr_quoted(
        suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reject_case(suite, "reject.crash")
    jsonl = tmp_path / "results.jsonl"
    status, out = run(capsys, suite, "--impl", script(tmp_path, MISBEHAVING),
                      "--jsonl", str(jsonl))
    assert status == 1
    [line] = [x for x in out.splitlines() if x.startswith("FAIL")]
    assert "reject.crash" in line
    assert "(exit status 3); its stderr ends: adapter: about to crash" in line
    assert outcomes(jsonl) == {"read.basic": "pass", "reject.crash": "fail",
                               "reject.truncated": "pass", "write.graph": "pass"}
    run_record = json.loads(jsonl.read_text().splitlines()[0])
    assert run_record["restarts"] == 1


def test_a_response_that_is_not_json_fails_the_case_and_restarts_the_adapter(
        suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reject_case(suite, "reject.junk")
    status, out = run(capsys, suite, "--impl", script(tmp_path, MISBEHAVING))
    assert status == 1
    assert "reject.junk (required) [R-FILE-004]: response is not a JSON line" in out
    assert counts(out, "reject", "required") == [1, 1, 0, 0, 0]
    assert counts(out, "write", "required") == [1, 0, 0, 0, 0]


def test_an_adapter_that_does_not_start_ends_the_run_with_status_2(
        suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert harness.main(["--cases", str(suite), "--impl", "/nonexistent/adapter"]) == 2
    assert "the adapter does not start" in capsys.readouterr().err
    assert harness.main(["--cases", str(suite), "--impl", "true"]) == 2
    assert "(exit status 0)" in capsys.readouterr().err  # it exited without a word


# -- expected failures, levels, reports ------------------------------------------

def _break(suite: Path, case_id: str) -> None:
    case_json = suite / case_id.split(".")[0] / case_id / "case.json"
    case = json.loads(case_json.read_text())
    case["expect"]["metadata"]["epoch"] = {"int": "4"}
    case_json.write_text(json.dumps(case))


def test_expected_failures_and_stale_entries(
        suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _break(suite, "read.basic")
    listed = tmp_path / "xfail.txt"
    listed.write_text("# known bugs\nread.basic   # epoch is off by one\n\n")
    status, out = run(capsys, suite, "--xfail", str(listed))
    assert status == 0, out
    assert counts(out, "read", "required") == [0, 0, 1, 0, 0]
    assert out.splitlines()[-1] == "RESULT: CONFORMANT (except 1 expected failure)"

    listed.write_text("read.*\nwrite.*\n")
    status, out = run(capsys, suite, "--xfail", str(listed))
    assert status == 1
    assert counts(out, "write", "required") == [0, 0, 0, 0, 1]
    assert f"STALE write.graph (required) [R-GRAPH-007]: passes, but is listed in {listed}" in out
    assert out.splitlines()[-1] == "RESULT: NOT CONFORMANT (1 stale expected failure)"


def test_recommended_failures_count_only_with_strict(
        suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    read_case(suite, "read.recommended-thing", level="recommended")
    _break(suite, "read.recommended-thing")
    status, out = run(capsys, suite)
    assert status == 0
    assert counts(out, "read", "recommended") == [0, 1, 0, 0, 0]
    assert "FAIL  read.recommended-thing (recommended)" in out
    status, out = run(capsys, suite, "--strict")
    assert status == 1
    assert out.splitlines()[-1] == "RESULT: NOT CONFORMANT (1 recommended case failed)"


def test_jsonl_and_junit_reports_parse(
        suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _break(suite, "read.basic")
    jsonl, junit = tmp_path / "r.jsonl", tmp_path / "r.xml"
    status, _ = run(capsys, suite, "--jsonl", str(jsonl), "--junit", str(junit))
    assert status == 1
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["record"] for r in records] == ["run", "case", "case", "case", "verdict"]
    assert records[0]["adapter"]["name"] == "ocf-python"
    assert records[1]["id"] == "read.basic"
    assert records[1]["requirements"] == ["R-DTYPE-001", "R-META-001"]
    assert records[-1] == {"record": "verdict", "conformant": False,
                           "line": "RESULT: NOT CONFORMANT (1 required case failed)",
                           "profiles": {"core-read": False, "write": True}}
    root = ET.parse(junit).getroot()
    suites = {s.get("name", ""): s for s in root.iter("testsuite")}
    assert sorted(suites) == ["read", "reject", "write"]
    assert suites["read"].get("failures") == "1"
    [failure] = root.iter("failure")
    assert "epoch" in (failure.get("message") or "")
    assert [c.get("name") for c in root.iter("testcase")] == [
        "read.basic", "reject.truncated", "write.graph"]


def test_filter_selects_cases_and_matching_nothing_is_an_error(
        suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run(capsys, suite, "--filter", "write.*", "--filter", "reject.*")
    assert status == 0
    assert "2 cases from" in out.splitlines()[0]
    assert harness.main(["--cases", str(suite), "--filter", "nothing.*"]) == 2


def test_a_malformed_case_stops_the_run_with_status_2(
        suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case_json = suite / "read" / "read.basic" / "case.json"
    case = json.loads(case_json.read_text())
    case["level"] = "mandatory"
    case["input"] = "../../../escape.ocf"
    case_json.write_text(json.dumps(case))
    assert harness.main(["--cases", str(suite)]) == 2
    err = capsys.readouterr().err
    assert "read.basic/case.json: 'level' is 'mandatory'" in err


def test_ocf_conformance_command_line(suite: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ocf", "conformance", "--cases", str(suite)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "RESULT: CONFORMANT"


# -- pieces: typed values, comparison, source.json, the adapter's answers -------

@pytest.mark.parametrize("value", [None, True, -(1 << 63), 0.1, -0.0, float("inf"), "é",
                                   b"\x00\xff", [1, [2.5]], {"a": {"b": None}}])
def test_parse_value_inverts_value(value: Any) -> None:
    assert semantics.value(semantics.parse_value(semantics.value(value))) == \
        semantics.value(value)


def test_parse_value_accepts_c99_hex_floats_and_refuses_decimal_ones() -> None:
    assert semantics.parse_value({"float": "0x1.8p+0"}) == 1.5
    assert semantics.parse_value({"float": "-0X1P-2"}) == -0.25
    for bad in ({"float": "1.5"}, {"int": 3}, {"int": "3.0"}, {"bool": 1},
                {"bytes": "***"}, {"nope": 1}, {"int": "1", "bool": True}, [1]):
        with pytest.raises(ValueError):  # noqa: PT011 - every kind of bad value
            semantics.parse_value(bad)


def test_canonical_meanings_ignore_spelling_and_slot_order() -> None:
    node: dict[str, Any] = {"type_name": "T", "children": {}, "attributes": {},
            "slot_variables": [["a", "m", "b"], ["a", "v", "c"]], "metadata": {}}
    one: dict[str, Any] = {"tensors": {"w": {"dtype": "int8", "shape": [1], "sha256": "AB"}},
           "metadata": {"x": {"float": "0x1.8p+0"}}, "object_graph": {"": node}}
    two: dict[str, Any] = {"tensors": {"w": {"dtype": "int8", "shape": [1], "sha256": "ab"}},
           "metadata": {"x": {"float": "0x1.8000000000000p+0"}},
           "object_graph": {"": {**node, "slot_variables": node["slot_variables"][::-1]}}}
    assert compare.difference(compare.canonical(one), compare.canonical(two)) is None
    two["tensors"]["w"]["shape"] = [2]
    assert compare.difference(compare.canonical(one), compare.canonical(two)) == \
        '["tensors"]["w"]["shape"][0]: expected 1, got 2'
    del two["tensors"]["w"]
    assert compare.difference(one["tensors"], two["tensors"]) == \
        '["w"]: missing (expected {"dtype": "int8", "shape": [1], "sha256": "AB"})'


def test_the_adapter_answers_hello_unknown_ops_and_errors(tmp_path: Path) -> None:
    hello = adapter.handle({"op": "hello", "protocol": 1})
    assert hello["result"] == "hello"
    assert hello["protocol"] == 1
    assert hello["ops"] == ["read", "write", "merge"]
    assert hello["profiles"] == ["core-read", "zstd", "slices", "object-graph", "write",
                                 "parts-merge", "pool"]  # the reference claims the whole suite
    assert adapter.handle({"op": "hello", "protocol": 2})["protocol"] == 1
    assert adapter.handle({"op": "hello", "protocol": 0})["category"] is None
    assert adapter.handle({"op": "rewrite"})["result"] == "skipped"
    missing = adapter.handle({"op": "read", "path": str(tmp_path / "nothing")})
    assert missing["category"] == "NOT_FOUND"
    broken = adapter.handle({"op": "write", "source": str(tmp_path / "none.json"),
                             "output": str(tmp_path / "o"), "layout": "file"})
    assert broken["result"] == "error"
    assert broken["category"] is None
    assert broken["message"].startswith("FileNotFoundError")


def test_an_unknown_bug_name_stops_the_adapter() -> None:
    done = subprocess.run([sys.executable, "-m", "ocf.conformance.adapter"], input="",
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "OCF_CONFORMANCE_BUG": "no-such"})
    assert done.returncode == 1
    assert "OCF_CONFORMANCE_BUG='no-such' names no bug" in done.stderr


# -- profiles ---------------------------------------------------------------------

def _needs_zstd(cases: Path, case_id: str) -> None:
    """Mark a case of ``cases`` as needing the zstd profile too."""
    path = cases / case_id.split(".", 1)[0] / case_id / "case.json"
    case = json.loads(path.read_text())
    path.write_text(json.dumps({**case, "profiles": ["core-read", "zstd"]}))


def test_an_adapter_claiming_some_profiles_is_judged_on_their_cases_only(
        suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_zstd(suite, "read.basic")
    _break(suite, "read.basic")  # would fail, were it run
    monkeypatch.setenv("HELLO", '{"profiles": ["core-read"]}')
    jsonl = tmp_path / "r.jsonl"
    status, out = run(capsys, suite, "--impl", script(tmp_path, HELLO_FROM_ENV),
                      "--jsonl", str(jsonl))
    assert status == 0, out
    assert outcomes(jsonl) == {"reject.truncated": "pass"}  # neither zstd nor write
    assert "(2 of other profiles not run)" in out.splitlines()[0]
    assert "profile core-read     CONFORMANT" in out
    assert out.splitlines()[-1] == "RESULT: CONFORMANT for profiles core-read"
    verdict = json.loads(jsonl.read_text().splitlines()[-1])
    assert verdict["profiles"] == {"core-read": True}


def test_each_claimed_profile_gets_its_own_verdict(
        suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_zstd(suite, "read.basic")
    _break(suite, "read.basic")
    monkeypatch.setenv("HELLO", '{"profiles": ["core-read", "zstd"]}')
    status, out = run(capsys, suite, "--impl", script(tmp_path, HELLO_FROM_ENV))
    assert status == 1, out
    assert "profile core-read     NOT CONFORMANT (1 required case failed)" in out
    assert "profile zstd          NOT CONFORMANT (1 required case failed)" in out
    assert out.splitlines()[-1] == ("RESULT: NOT CONFORMANT (1 required case failed) for "
                                    "profiles core-read, zstd")


def test_an_adapter_declaring_no_profiles_is_judged_on_every_case(
        suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The skip-all shell adapter's hello has no "profiles", as adapters older than them.
    _needs_zstd(suite, "read.basic")
    status, out = run(capsys, suite, "--impl", f"sh {REPO / 'conformance/adapters/skip_all.sh'}")
    assert status == 1
    assert "every profile" in out.splitlines()[0]
    assert out.splitlines()[-1] == "RESULT: NOT CONFORMANT (3 required cases skipped)"
