"""The outcome of each case, and which outcomes count against conformance."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ocf.conformance.cases import Case


class Outcome(enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    XFAIL = "xfail"  # failed or skipped, and listed as an expected failure
    SKIP = "skip"
    STALE = "stale"  # passed, but listed as an expected failure


@dataclass(frozen=True)
class Result:
    case: Case
    outcome: Outcome
    reason: str = ""
    seconds: float = 0.0


def counted_levels(strict: bool) -> tuple[str, ...]:
    """The levels whose failures and skips make an implementation not conformant."""
    return ("required", "recommended") if strict else ("required",)


def counts_against(result: Result, strict: bool) -> bool:
    """Whether ``result`` makes the run NOT CONFORMANT."""
    if result.outcome is Outcome.STALE:
        return True
    return (result.outcome in (Outcome.FAIL, Outcome.SKIP)
            and result.case.level in counted_levels(strict))
