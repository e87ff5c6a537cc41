"""Differential test of two OCF implementations on damaged checkpoints.

    .venv/bin/python conformance/tools/differential.py --impl impl/cpp/build/ocf-cpp-adapter
        [--against "python -m ocf.conformance.adapter"] [--rounds 300] [--seed 1]

Makes ``--rounds`` damaged copies of the inputs of the suite's read cases
and asks both adapters (conformance/protocol.md) to read each one. Most
copies have bytes of their index changed and the index CRC-32C recomputed,
so that the damage reaches the parse, the table checks, the graph checks and
the tensor reads instead of stopping at [R-FILE-006]; the others have bytes
changed anywhere (shard files included) or are truncated. The spec fixes the
outcome of every read, including which check reports first ([R-ERR-002]),
so two conforming implementations must give the same answer: the same error
category, or ``ok`` with meanings that compare equal. Every disagreement is
printed with the damaged copy kept for inspection, and the exit status is 1.
The copies are deterministic for a given seed and suite.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import IO

from ocf.conformance.compare import canonical, difference
from ocf.format.checksum import crc32c

ROOT = Path(__file__).resolve().parents[2]
FOOTER_MAGIC = b"\x89OCFEND\n"


class Adapter:
    """One long-running adapter process, spoken to one request at a time."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.process = subprocess.Popen(
            shlex.split(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True)
        self.ask({"id": 0, "op": "hello", "protocol": 1})

    def ask(self, request: dict[str, object]) -> dict[str, object]:
        stdin, stdout = self._pipes()
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            sys.exit(f"differential: {self.command} died on {json.dumps(request)}")
        answer: dict[str, object] = json.loads(line)
        return answer

    def close(self) -> None:
        stdin, _ = self._pipes()
        stdin.write(json.dumps({"id": -1, "op": "bye"}) + "\n")
        stdin.close()
        self.process.wait(timeout=10)

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        return self.process.stdin, self.process.stdout


def outcome(answer: dict[str, object]) -> str:
    """``ok``, or the error category (``null`` for an error outside them)."""
    return "ok" if answer.get("result") == "ok" else str(answer.get("category"))


def disagreement(a: dict[str, object], b: dict[str, object]) -> str | None:
    if outcome(a) != outcome(b):
        return (f"{outcome(a)} ({a.get('message', '')}) against "
                f"{outcome(b)} ({b.get('message', '')})")
    if outcome(a) == "ok":
        return difference(canonical(dict(b)), canonical(dict(a)))
    return None


def read_inputs(cases: Path) -> list[Path]:
    inputs = []
    for case in sorted((cases / "read").iterdir()):
        description = json.loads((case / "case.json").read_text(encoding="utf-8"))
        inputs.append(case / description["input"])
    return inputs


def damage_index(data: bytearray, rng: random.Random) -> bool:
    """Change 1 to 3 index bytes and fix the index CRC; False if there is no index."""
    if len(data) < 96 or data[-8:] != FOOTER_MAGIC:
        return False
    offset, length = struct.unpack_from("<QQ", data, len(data) - 32)
    if length == 0 or offset + length > len(data) - 32:
        return False
    for _ in range(rng.randint(1, 3)):
        data[offset + rng.randrange(length)] = rng.randrange(256)
    struct.pack_into("<I", data, len(data) - 16, crc32c(bytes(data[offset:offset + length])))
    return True


def damage_anywhere(data: bytearray, rng: random.Random) -> None:
    for _ in range(rng.randint(1, 4)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    if data and rng.random() < 0.1:
        del data[rng.randrange(len(data)):]


def damaged_copy(source: Path, target: Path, rng: random.Random) -> None:
    if source.is_dir():
        shutil.copytree(source, target)
        files = sorted(p for p in target.iterdir() if p.is_file())
    else:
        shutil.copyfile(source, target)
        files = [target]
    victim = rng.choice(files)
    data = bytearray(victim.read_bytes())
    if rng.random() >= 0.8 or not damage_index(data, rng):
        damage_anywhere(data, rng)
    victim.write_bytes(bytes(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", required=True, help="the adapter command under test")
    reference = f"{shlex.quote(sys.executable)} -m ocf.conformance.adapter"
    parser.add_argument("--against", default=reference,
                        help="the adapter to compare with (default: the reference)")
    parser.add_argument("--cases", type=Path, default=ROOT / "conformance" / "cases")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    inputs = read_inputs(args.cases)
    adapters = [Adapter(args.impl), Adapter(args.against)]
    work = Path(tempfile.mkdtemp(prefix="ocf-differential-"))
    outcomes: Counter[str] = Counter()
    disagreements = 0
    for n in range(1, args.rounds + 1):
        copy = work / f"copy-{n}"
        damaged_copy(rng.choice(inputs), copy, rng)
        request: dict[str, object] = {
            "id": n, "op": "read", "case": "differential", "path": str(copy)}
        tested, reference = (adapter.ask(request) for adapter in adapters)
        outcomes[outcome(tested)] += 1
        found = disagreement(tested, reference)
        if found:
            disagreements += 1
            print(f"DISAGREE {copy}: {found}")
        elif copy.is_dir():
            shutil.rmtree(copy)
        else:
            copy.unlink()
    for adapter in adapters:
        adapter.close()
    if disagreements == 0:
        shutil.rmtree(work)
    summary = ", ".join(f"{name} {count}" for name, count in sorted(outcomes.items()))
    print(f"differential: {args.rounds} damaged copies, {disagreements} disagreement(s); {summary}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
