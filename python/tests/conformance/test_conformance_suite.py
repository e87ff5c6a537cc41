"""The real conformance suite (conformance/cases) against real adapters.

- The reference implementation, driven through the external protocol by
  ``ocf conformance`` in a subprocess, is conformant with no expected
  failure: every case passes, without ``--xfail``.
- Every deliberately broken variant of it (ocf.conformance.bugs) is NOT
  CONFORMANT, and the cases written to catch that bug fail.
- The POSIX shell adapter conformance/adapters/skip_all.sh runs end to end
  and is NOT CONFORMANT, every case skipped.

The harness runs the whole suite once per bug; bugs run in parallel,
each in its own process, to keep this file fast.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from repo_paths import REPOSITORY

from ocf.conformance import bugs
from ocf.conformance.cases import PROFILES, load_cases, matches

REPO = REPOSITORY
CASES = REPO / "conformance" / "cases"
SKIP_ALL = REPO / "conformance" / "adapters" / "skip_all.sh"
BUG_ENV = "OCF_CONFORMANCE_BUG"
TIMEOUT = 600


@dataclass(frozen=True)
class Run:
    """One run of ``ocf conformance``: its exit status, output and JSON-lines records."""

    returncode: int
    stdout: str
    stderr: str
    records: list[dict[str, Any]]

    @property
    def cases(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r for r in self.records if r["record"] == "case"}

    def outcomes(self, outcome: str) -> list[str]:
        return sorted(i for i, r in self.cases.items() if r["outcome"] == outcome)

    @property
    def failure_lines(self) -> list[str]:
        """The report's lines of unexpected failures."""
        return [line for line in self.stdout.splitlines() if line.startswith("FAIL ")]

    def explain(self) -> str:
        return (f"exit status {self.returncode}\n--- stdout\n{self.stdout}\n"
                f"--- stderr\n{self.stderr}")


def harness(workdir: Path, *options: str, bug: str | None = None) -> Run:
    """Run ``python -m ocf conformance`` on the real suite in a subprocess."""
    workdir.mkdir(parents=True, exist_ok=True)
    jsonl = workdir / "results.jsonl"
    env = {k: v for k, v in os.environ.items() if k != BUG_ENV}
    if bug is not None:
        env[BUG_ENV] = bug
    done = subprocess.run(
        [sys.executable, "-m", "ocf", "conformance", "--cases", str(CASES),
         "--jsonl", str(jsonl), *options],
        capture_output=True, text=True, env=env, timeout=TIMEOUT, check=False)
    records = ([json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
               if jsonl.exists() else [])
    return Run(done.returncode, done.stdout, done.stderr, records)


@pytest.fixture(scope="module")
def bug_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[dict[str, Future[Run]]]:
    """The harness run against every bug whose test is selected, all started at
    once and run in parallel."""
    selected = sorted({str(item.callspec.params["name"]) for item in request.session.items
                       if isinstance(item, pytest.Function)
                       and item.originalname == "test_every_bug_is_caught"})
    root = tmp_path_factory.mktemp("bugs")
    workers = max(1, min(len(selected), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield {name: pool.submit(harness, root / name, bug=name)
               for name in selected}


# -- the suite itself ----------------------------------------------------------

def test_the_suite_is_there() -> None:
    cases = load_cases(CASES)
    groups = {case.group for case in cases}
    assert len(cases) >= 100, f"only {len(cases)} cases in {CASES}"
    assert {"read", "reject", "write", "merge"} <= groups, groups


# -- the reference implementation ----------------------------------------------

def test_reference_implementation_is_conformant(tmp_path: Path) -> None:
    junit = tmp_path / "results.xml"
    run = harness(tmp_path, "--junit", str(junit))
    assert run.returncode == 0, run.explain()
    # A plain verdict: no expected failure is needed.
    assert run.stdout.strip().splitlines()[-1] == "RESULT: CONFORMANT", run.explain()
    assert not run.failure_lines, run.explain()
    assert run.outcomes("fail") == run.outcomes("stale") == run.outcomes("xfail") == [], \
        run.explain()
    # The JSON lines: a run record, a record per case, the verdict last.
    assert run.records[0]["record"] == "run"
    assert run.records[0]["adapter"]["name"] == "ocf-python"
    assert run.records[-1] == {"record": "verdict", "conformant": True,
                               "line": run.stdout.strip().splitlines()[-1],
                               "profiles": dict.fromkeys(PROFILES, True)}
    assert len(run.cases) == len(load_cases(CASES))
    assert set(run.outcomes("pass")) == set(run.cases)
    # The JUnit XML: one suite per group, no failures, every case once.
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert {s.get("name") for s in suites} == {r["group"] for r in run.cases.values()}
    assert all(s.get("failures") == "0" for s in suites)
    assert sorted(c.get("name", "") for c in root.iter("testcase")) == sorted(run.cases)


# -- broken variants of the reference implementation ---------------------------

def test_the_registry_holds_many_bugs() -> None:
    assert len(bugs.BUGS) >= 10, sorted(bugs.BUGS)
    assert set(bugs.CAUGHT_BY) == set(bugs.BUGS)
    for name, inject in bugs.BUGS.items():
        assert (inject.__doc__ or "").strip(), f"bug {name} does not say what it imitates"


def test_an_unknown_bug_stops_the_adapter(tmp_path: Path) -> None:
    run = harness(tmp_path, "--filter", "read.dtype.float32", bug="no_such_bug")
    assert run.returncode == 2, run.explain()
    assert "no_such_bug" in run.stderr


@pytest.mark.parametrize("name", sorted(bugs.BUGS))
def test_every_bug_is_caught(name: str, bug_runs: dict[str, Future[Run]]) -> None:
    run = bug_runs[name].result()
    assert run.returncode == 1, run.explain()
    assert "RESULT: NOT CONFORMANT" in run.stdout, run.explain()
    assert run.failure_lines, run.explain()
    failed = set(run.outcomes("fail"))
    for pattern in bugs.CAUGHT_BY[name]:
        meant = [i for i in run.cases if matches(i, [pattern])]
        assert meant, f"{name}: {pattern!r} matches no case of the suite"
        missed = sorted(set(meant) - failed)
        assert not missed, f"{name}: cases meant to catch it pass: {missed}\n{run.explain()}"


# -- an adapter in another language --------------------------------------------

def test_skip_all_shell_adapter_skips_everything(tmp_path: Path) -> None:
    junit = tmp_path / "results.xml"
    run = harness(tmp_path, "--impl", f"sh {shlex.quote(str(SKIP_ALL))}", "--junit", str(junit))
    assert run.returncode == 1, run.explain()
    assert run.records[0]["adapter"]["name"] == "skip-all-shell"
    assert run.outcomes("skip") == sorted(run.cases), run.explain()
    assert len(run.cases) == len(load_cases(CASES))
    required = sum(r["level"] == "required" for r in run.cases.values())
    verdict = run.stdout.strip().splitlines()[-1]
    assert verdict.startswith("RESULT: NOT CONFORMANT"), run.explain()
    assert f"{required} required cases skipped" in verdict, run.explain()
    assert not run.failure_lines, run.explain()
    skipped = sum(int(s.get("skipped", "0")) for s in ET.parse(junit).getroot())
    assert skipped == len(run.cases)
