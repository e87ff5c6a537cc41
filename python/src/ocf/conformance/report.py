"""Reporting a run: the results table, unexpected failures, the verdict, and the
JSON-lines and JUnit XML files."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ocf.conformance.cases import LEVELS, PROFILES
from ocf.conformance.driver import Hello
from ocf.conformance.results import Outcome, Result, counted_levels, counts_against


@dataclass(frozen=True)
class Run:
    """What was run: against which adapter, with which suite and options."""

    adapter: Hello
    command: str
    cases: str
    xfail: str
    strict: bool
    restarts: int
    unclaimed: int = 0  # cases of profiles the adapter does not declare, not run


@dataclass(frozen=True)
class Verdict:
    conformant: bool
    line: str


def header(run: Run, results: Sequence[Result]) -> str:
    a = run.adapter
    declared = "every profile" if a.profiles is None or set(PROFILES) <= set(a.profiles) \
        else f"profiles {', '.join(a.profiles)}"
    unclaimed = f" ({run.unclaimed} of other profiles not run)" if run.unclaimed else ""
    return (f"OCF conformance: {a.name} {a.version} (protocol {a.protocol}, ops "
            f"{', '.join(a.ops) or 'none'}, {declared}), {len(results)} cases{unclaimed} "
            f"from {run.cases}, {run.restarts} adapter restart(s)")


def table(results: Sequence[Result]) -> str:
    """Counts of each outcome per group and level, and in total."""
    counts: Counter[tuple[str, str, Outcome]] = Counter(
        (r.case.group, r.case.level, r.outcome) for r in results)
    rows = [["group", "level", *(o.value for o in Outcome)]]
    for group, level in sorted({(g, lv) for g, lv, _ in counts},
                               key=lambda k: (k[0], LEVELS.index(k[1]))):
        rows.append([group, level, *(str(counts[group, level, o]) for o in Outcome)])
    totals = Counter(r.outcome for r in results)
    rows.append(["total", "", *(str(totals[o]) for o in Outcome)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i < 2 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
                     for row in rows)


def problems(results: Sequence[Result], strict: bool, xfail: str) -> list[str]:
    """One line per unexpected failure, stale expected failure and counted skip."""
    lines = []
    for r in results:
        label = {Outcome.FAIL: "FAIL", Outcome.STALE: "STALE", Outcome.SKIP: "SKIP"}.get(
            r.outcome)
        if label is None or (r.outcome is Outcome.SKIP and not counts_against(r, strict)):
            continue
        reason = f"passes, but is listed in {xfail}" if r.outcome is Outcome.STALE else r.reason
        lines.append(f"{label:5} {r.case.id} ({r.case.level}) "
                     f"[{', '.join(r.case.requirements)}]: {reason}")
    return lines


def verdict(results: Sequence[Result], strict: bool) -> Verdict:
    """CONFORMANT unless a counted level has a failure or skip, or an entry is stale."""
    against = Counter((r.case.level, r.outcome) for r in results if counts_against(r, strict))
    reasons = [f"{n} {level} case{'s' * (n > 1)} "
               f"{'failed' if outcome is Outcome.FAIL else 'skipped'}"
               for level in counted_levels(strict) for outcome in (Outcome.FAIL, Outcome.SKIP)
               if (n := against[level, outcome])]
    if stale := sum(n for (_, o), n in against.items() if o is Outcome.STALE):
        reasons.append(f"{stale} stale expected failure{'s' * (stale > 1)}")
    if reasons:
        return Verdict(False, f"RESULT: NOT CONFORMANT ({', '.join(reasons)})")
    expected = sum(r.outcome is Outcome.XFAIL for r in results)
    if expected:
        return Verdict(True, f"RESULT: CONFORMANT (except {expected} expected "
                             f"failure{'s' * (expected > 1)})")
    return Verdict(True, "RESULT: CONFORMANT")


def profile_verdicts(run: Run, results: Sequence[Result]) -> dict[str, Verdict]:
    """The verdict of each claimed profile that has cases: over the cases that need it."""
    claimed = PROFILES if run.adapter.profiles is None else run.adapter.profiles
    return {profile: verdict(mine, run.strict) for profile in claimed
            if (mine := [r for r in results if profile in r.case.profiles])}


def final(run: Run, results: Sequence[Result]) -> Verdict:
    """The verdict of the run; it names the profiles when the adapter claims only some
    (claiming all, or declaring none, is a claim of the whole suite)."""
    done = verdict(results, run.strict)
    if run.adapter.profiles is None or set(PROFILES) <= set(run.adapter.profiles):
        return done
    return Verdict(done.conformant, f"{done.line} for profiles {', '.join(run.adapter.profiles)}")


def text(run: Run, results: Sequence[Result]) -> str:
    """The whole printed report."""
    lines = [header(run, results), "", table(results), ""]
    found = problems(results, run.strict, run.xfail)
    lines += [*found, ""] if found else []
    width = max(map(len, PROFILES))
    lines += [f"profile {name.ljust(width)}  {done.line.removeprefix('RESULT: ')}"
              for name, done in profile_verdicts(run, results).items()]
    lines.append(final(run, results).line)
    return "\n".join(lines)


def write_jsonl(path: Path, run: Run, results: Sequence[Result]) -> None:
    """One JSON object per line: the run, each case, then the verdict."""
    done = final(run, results)
    records = [{"record": "run", **asdict(run)}]
    records += [{"record": "case", "id": r.case.id, "group": r.case.group,
                 "level": r.case.level, "op": r.case.op,
                 "requirements": list(r.case.requirements),
                 "profiles": list(r.case.profiles), "outcome": r.outcome.value,
                 "reason": r.reason, "seconds": round(r.seconds, 6)} for r in results]
    records.append({"record": "verdict", "conformant": done.conformant, "line": done.line,
                    "profiles": {name: v.conformant
                                 for name, v in profile_verdicts(run, results).items()}})
    path.write_text("".join(json.dumps(x) + "\n" for x in records), encoding="utf-8")


def write_junit(path: Path, run: Run, results: Sequence[Result]) -> None:
    """JUnit XML: a test suite per group; FAIL and STALE are failures, SKIP and XFAIL
    skipped."""
    root = ET.Element("testsuites", name=f"ocf-conformance {run.adapter.name}")
    for group in sorted({r.case.group for r in results}):
        mine = [r for r in results if r.case.group == group]
        outcomes = Counter(r.outcome for r in mine)
        suite = ET.SubElement(
            root, "testsuite", name=group, tests=str(len(mine)), errors="0",
            failures=str(outcomes[Outcome.FAIL] + outcomes[Outcome.STALE]),
            skipped=str(outcomes[Outcome.SKIP] + outcomes[Outcome.XFAIL]),
            time=f"{sum(r.seconds for r in mine):.3f}")
        for r in mine:
            _testcase(suite, r, run)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _testcase(suite: ET.Element, r: Result, run: Run) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"{r.case.group}.{r.case.level}",
                         name=r.case.id, time=f"{r.seconds:.3f}")
    requirements = ", ".join(r.case.requirements)
    if r.outcome is Outcome.FAIL:
        ET.SubElement(case, "failure", message=r.reason).text = f"[{requirements}] {r.reason}"
    elif r.outcome is Outcome.STALE:
        ET.SubElement(case, "failure", message=f"passes, but is listed in {run.xfail}")
    elif r.outcome is Outcome.SKIP:
        ET.SubElement(case, "skipped", message=r.reason)
    elif r.outcome is Outcome.XFAIL:
        ET.SubElement(case, "skipped", message=f"expected failure: {r.reason}")
