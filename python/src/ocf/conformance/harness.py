"""The conformance harness: run the suite's cases against an implementation.

    ocf conformance [--impl COMMAND] [--cases DIR] [--filter GLOB]... [--xfail FILE]
                    [--jsonl FILE] [--junit FILE] [--timeout SECONDS] [--strict]
                    [--workdir DIR]

It starts the implementation's adapter (conformance/protocol.md; by
default the reference adapter, ``python -m ocf.conformance.adapter``),
sends it every case, judges the answers, prints a table per group and
level, the unexpected failures and a verdict line, and exits with status 0
when the implementation is conformant, 1 when it is not, and 2 when the
run could not be made (malformed cases, an adapter that does not start).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ocf.conformance import report, xfail
from ocf.conformance.cases import (
    Case,
    CaseError,
    claimed,
    load_cases,
    make_links,
    materialize,
)
from ocf.conformance.driver import Adapter, AdapterError, Message, StartError
from ocf.conformance.judge import Verdict, judge
from ocf.conformance.results import Outcome, Result

CASES_ENV = "OCF_CONFORMANCE_CASES"
# Shipped with the package (package data); in the source tree, a symlink to the
# repository's conformance/cases.
PACKAGED_CASES = Path(__file__).parent / "cases"
WHERE_TO_GET_CASES = ("the suite is conformance/cases of the OCF repository, and ships in the "
                      "ocf wheel as ocf/conformance/cases")


def default_command() -> list[str]:
    return [sys.executable, "-m", "ocf.conformance.adapter"]


def default_cases() -> Path:
    """$OCF_CONFORMANCE_CASES, else the cases shipped with this package."""
    return Path(os.environ.get(CASES_ENV) or PACKAGED_CASES)


def request_for(case: Case, workdir: Path) -> tuple[Message, Path | None]:
    """The request that runs ``case``, and where a write case's output goes (for a
    merge case, the copy of its directory that the adapter merges in place)."""
    if case.op == "read":
        return {"op": "read", "case": case.id, "path": str(materialize(case, workdir))}, None
    if case.op == "merge":
        assert case.input is not None
        output = workdir / "merged" / case.id / case.input.name
        if output.exists():
            shutil.rmtree(output)
        shutil.copytree(case.input, output)
        make_links(case, output)
        return {"op": "merge", "case": case.id, "path": str(output), "save_id": case.save_id,
                "parts": case.parts}, output
    output = workdir / "written" / case.id / (
        "checkpoint.ocf" if case.layout == "file" else "checkpoint")
    output.parent.mkdir(parents=True, exist_ok=True)
    return {"op": "write", "case": case.id, "source": str(case.source),
            "output": str(output), "layout": case.layout}, output


def run_case(adapter: Adapter, case: Case, workdir: Path) -> Verdict:
    assert adapter.hello is not None
    if case.op not in adapter.hello.ops:
        return Outcome.SKIP, f"the adapter does not implement {case.op!r}"
    message, output = request_for(case, workdir)
    try:
        response = adapter.request(message)
    except AdapterError as exc:
        return Outcome.FAIL, str(exc)
    return judge(case, response, output)


def run_all(adapter: Adapter, cases: Sequence[Case], workdir: Path,
            expected: xfail.ExpectedFailures) -> list[Result]:
    """Run every case in order; once the adapter cannot be restarted, the rest fail."""
    results: list[Result] = []
    gone: str | None = None
    for case in cases:
        started = time.monotonic()
        if gone is None:
            try:
                outcome, reason = run_case(adapter, case, workdir)
            except StartError as exc:
                gone = f"adapter could not be restarted: {exc}"
        if gone is not None:
            outcome, reason = Outcome.FAIL, gone
        results.append(Result(case, expected.apply(case.id, outcome), reason,
                              time.monotonic() - started))
    return results


@contextlib.contextmanager
def _workdir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="ocf-conformance-") as temporary:
        yield Path(temporary)


def _parser(prog: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Run the OCF conformance suite "
                                "against an implementation's adapter (conformance/protocol.md).")
    p.add_argument("--impl", metavar="COMMAND",
                   help="the adapter command, split like a shell would "
                        "(default: the reference adapter of this Python package)")
    p.add_argument("--cases", metavar="DIR", type=Path,
                   help=f"the suite's cases (default: ${CASES_ENV}, else the cases shipped "
                        "with this package)")
    p.add_argument("--filter", metavar="GLOB", action="append", default=[],
                   help="run only cases whose id matches; may be repeated")
    p.add_argument("--xfail", metavar="FILE", type=Path,
                   help="expected failures: one case id or glob per line, '#' comments")
    p.add_argument("--jsonl", metavar="FILE", type=Path, help="write results as JSON lines")
    p.add_argument("--junit", metavar="FILE", type=Path, help="write results as JUnit XML")
    p.add_argument("--timeout", metavar="SECONDS", type=float, default=30.0,
                   help="time allowed per request (default: 30)")
    p.add_argument("--strict", action="store_true",
                   help="recommended cases count towards conformance too")
    p.add_argument("--workdir", metavar="DIR", type=Path,
                   help="keep written checkpoints and the adapter's stderr log here "
                        "(default: a temporary directory, removed afterwards)")
    return p


def _fail(message: str) -> int:
    print(f"ocf conformance: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    args = _parser(prog).parse_args(argv)
    command = shlex.split(args.impl) if args.impl else default_command()
    cases_dir = args.cases or default_cases()
    if not cases_dir.is_dir():
        return _fail(f"no cases at {cases_dir}; pass --cases DIR or set ${CASES_ENV} "
                     f"({WHERE_TO_GET_CASES})")
    try:
        cases = load_cases(cases_dir, args.filter)
        expected = xfail.load(args.xfail) if args.xfail else xfail.ExpectedFailures()
    except (CaseError, OSError) as exc:
        return _fail(str(exc))
    if not cases:
        return _fail(f"no cases in {cases_dir}" + (" match the filter" if args.filter else ""))
    for pattern in expected.unused(c.id for c in cases):
        print(f"ocf conformance: note: {expected.source}: {pattern!r} matches no case run",
              file=sys.stderr)
    with _workdir(args.workdir) as workdir, Adapter(
            command, timeout=args.timeout, log=workdir / "adapter-stderr.log") as adapter:
        try:
            hello = adapter.start()
        except StartError as exc:
            return _fail(f"the adapter does not start: {exc}")
        # Cases of profiles the adapter does not declare are neither run nor counted.
        mine = [case for case in cases if claimed(case, hello.profiles)]
        results = run_all(adapter, mine, workdir, expected)
        restarts = adapter.restarts
    run = report.Run(adapter=hello, command=shlex.join(command), cases=str(cases_dir),
                     xfail=expected.source, strict=args.strict, restarts=restarts,
                     unclaimed=len(cases) - len(mine))
    print(report.text(run, results))
    if args.jsonl:
        report.write_jsonl(args.jsonl, run, results)
    if args.junit:
        report.write_junit(args.junit, run, results)
    return 0 if report.verdict(results, args.strict).conformant else 1


if __name__ == "__main__":
    sys.exit(main())
