"""The top frames of py-spy's raw profiles (``py-spy record --format raw``, as
``bench_scaling.py --profile`` writes them): per file, the share of samples in
which each frame is on the stack (inclusive) and at its top (self).

    .venv/bin/python python/benchmarks/pyspy_top.py [--top 15] [--match ocf] FILE...

``--match`` keeps the inclusive lines of frames whose text contains it (a
module or function name), to follow one library's calls.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# "func (file.py:line)": the line number goes, so that one function is one frame.
_LINE = re.compile(r":\d+\)$")


def _frames(stack: str) -> list[str]:
    return [_LINE.sub(")", frame) for frame in stack.split(";")]


def summarize(path: Path, top: int, match: str | None) -> str:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        samples = int(count)
        frames = _frames(stack)
        total += samples
        own[frames[-1]] += samples
        for frame in set(frames):
            inclusive[frame] += samples
    lines = [f"## {path.name}: {total} samples"]
    chosen = [(f, n) for f, n in inclusive.most_common() if match is None or match in f]
    lines.append("inclusive:")
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in chosen[:top]]
    lines.append("self:")
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--match", default=None)
    args = parser.parse_args()
    for path in args.files:
        print(summarize(path, args.top, args.match), end="\n\n")


if __name__ == "__main__":
    main()
