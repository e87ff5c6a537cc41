"""The fuzzing loop, its summary, and the command line."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fuzzing
from fuzzing.mutations import mutate
from fuzzing.seeds import Files, make_seeds
from fuzzing.worker import Result, Worker, run_one

# With --squeezed, that share of the inputs is read with little memory (bytes beyond
# what the worker maps), where running out must be an OCFError too (OutOfMemoryError).
# Off by default: readers finish under memory pressure (ocf.format.workers), but the
# Writer that safetensors and npz conversions use starts threads with threading, whose
# start() can wait forever when the new thread runs out of memory before it starts.
SQUEEZES = [1 << 20, 2 << 20, 4 << 20, 8 << 20]
FAILURES = ("escape", "hang", "crash", "over-allocation")
_PLURAL = {"escape": "escapes", "hang": "hangs", "crash": "crashes",
           "over-allocation": "over-allocations"}


@dataclass
class Summary:
    seconds: float = 0.0
    inputs: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    by_format: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 1), "inputs": self.inputs,
                "inputs_per_second": round(self.inputs / max(self.seconds, 1e-9), 1),
                "outcomes": dict(self.outcomes.most_common()),
                "by_format": dict(self.by_format.most_common()),
                "failures": {k: self.outcomes[k] for k in FAILURES},
                "failed_inputs": self.failures}

    def table(self) -> str:
        rows = [("inputs", str(self.inputs)), ("seconds", f"{self.seconds:.0f}"),
                ("inputs per second", f"{self.inputs / max(self.seconds, 1e-9):.1f}")]
        rows += [(f"inputs: {k}", str(v)) for k, v in self.by_format.most_common()]
        rows += [(f"outcome: {k}", str(v)) for k, v in self.outcomes.most_common()
                 if k not in FAILURES]
        rows += [(_PLURAL[k], str(self.outcomes[k])) for k in FAILURES]
        width = max(len(k) for k, _ in rows)
        return "\n".join([f"| {'what':<{width}} | count |", f"|{'-' * (width + 2)}|-------|"]
                         + [f"| {k:<{width}} | {v} |" for k, v in rows])


def _save_failure(artifacts: Path, number: int, directory: Path, result: Result) -> str:
    where = artifacts / f"{number:07d}-{result.outcome}"
    shutil.copytree(directory, where / "input", symlinks=True)
    (where / "detail.txt").write_text(result.detail)
    return str(where)


def _materialize(directory: Path, files: Files) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    for name, data in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def campaign(seconds: float, seed: int, timeout: float, artifacts: Path | None,
             max_inputs: int | None = None, squeezed: float = 0.0) -> Summary:
    rng = random.Random(seed)
    scratch_root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    summary = Summary()
    with tempfile.TemporaryDirectory(prefix="ocf-fuzz-", dir=scratch_root) as tmp:
        work = Path(tmp)
        seeds = make_seeds(work / "seeds", seed)
        donors: dict[str, list[bytes]] = {}
        for s in seeds:
            donors.setdefault(s.kind, []).extend(s.files.values())
        case = work / "input"
        worker = Worker()
        start = time.monotonic()
        while time.monotonic() - start < seconds and (max_inputs is None
                                                      or summary.inputs < max_inputs):
            chosen = rng.choice(seeds)
            files = mutate(chosen, rng, donors)
            _materialize(case, files)
            verify = rng.random() >= 0.25
            squeeze = rng.choice(SQUEEZES) if rng.random() < squeezed else 0
            result = run_one(worker, chosen.kind, case, chosen.target, verify, timeout,
                             squeeze)
            summary.inputs += 1
            summary.by_format[chosen.kind] += 1
            summary.outcomes[result.outcome] += 1
            if result.outcome in FAILURES:
                saved = _save_failure(artifacts, summary.inputs, case, result) \
                    if artifacts is not None else ""
                summary.failures.append({"outcome": result.outcome, "format": chosen.kind,
                                         "verify": str(verify), "squeeze": str(squeeze),
                                         "detail": result.detail[:3000], "saved": saved})
        summary.seconds = time.monotonic() - start
        worker.close()
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(fuzzing.__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds one input may take before it counts as a hang")
    parser.add_argument("--max-inputs", type=int, default=None)
    parser.add_argument("--squeezed", type=float, default=0.0,
                        help="share of inputs read with 1 to 8 MiB of memory to spare")
    parser.add_argument("--artifacts", type=Path, default=None,
                        help="directory for failing inputs")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    if args.artifacts is not None:
        args.artifacts.mkdir(parents=True, exist_ok=True)
    summary = campaign(args.seconds, seed, args.timeout, args.artifacts, args.max_inputs,
                       args.squeezed)
    if args.json:
        print(json.dumps({"seed": seed, **summary.as_json()}))
    else:
        print(f"seed {seed}")
        print(summary.table())
        for failure in summary.failures[:20]:
            print(f"\n{failure['outcome']} ({failure['format']}, verify "
                  f"{failure['verify']}, squeeze {failure['squeeze']}) {failure['saved']}\n"
                  f"{failure['detail']}")
    return 1 if any(summary.outcomes[k] for k in FAILURES) else 0
