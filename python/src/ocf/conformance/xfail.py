"""Expected-failure lists: one case id or fnmatch pattern per line, '#' comments.

A listed case that fails (or is skipped) is an expected failure, XFAIL; a
listed case that passes is a stale entry, STALE, and fails the run, so the
list cannot silently outlive the bugs it records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ocf.conformance.cases import matches
from ocf.conformance.results import Outcome


@dataclass(frozen=True)
class ExpectedFailures:
    patterns: tuple[str, ...] = ()
    source: str = ""

    def listed(self, case_id: str) -> bool:
        return matches(case_id, self.patterns)

    def apply(self, case_id: str, outcome: Outcome) -> Outcome:
        """The outcome of a case once this list is taken into account."""
        if not self.listed(case_id):
            return outcome
        if outcome is Outcome.PASS:
            return Outcome.STALE
        return Outcome.XFAIL if outcome in (Outcome.FAIL, Outcome.SKIP) else outcome

    def unused(self, case_ids: Iterable[str]) -> list[str]:
        """The patterns that match none of ``case_ids``."""
        ids = list(case_ids)
        return [p for p in self.patterns if not any(matches(i, [p]) for i in ids)]


def load(path: Path) -> ExpectedFailures:
    patterns = []
    for line in path.read_text(encoding="utf-8").splitlines():
        pattern = line.split("#", 1)[0].strip()
        if pattern:
            patterns.append(pattern)
    return ExpectedFailures(tuple(patterns), str(path))
