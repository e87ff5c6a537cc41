"""Rebuild every case of the OCF conformance suite, deterministically.

    .venv/bin/python conformance/generate/generate_all.py [--out DIR] [--update-zstd-cache]

Removes the output directory (by default conformance/cases) and writes every
case again: two runs give identical bytes. Zstandard frames come from
zstd_frames.json beside this script, so the output does not depend on the
installed libzstd; a case that needs a frame the cache lacks makes the run
fail unless --update-zstd-cache is given, which records it (and drops frames
no case uses any more).

Groups: ``read`` (valid checkpoints and what they mean), ``reject`` (damaged
or invalid checkpoints and the error category a reader reports), ``write``
(neutral descriptions a writer turns into a checkpoint), ``merge`` (the parts
of a multi-writer save, and what merging them gives or the error category).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cases_merge  # noqa: E402
import cases_pool  # noqa: E402
import cases_protobuf  # noqa: E402
import cases_read  # noqa: E402
import cases_reject  # noqa: E402
import cases_wire  # noqa: E402
import cases_write  # noqa: E402
import ocfbytes  # noqa: E402
from case_dirs import Suite  # noqa: E402

DEFAULT_OUT = HERE.parent / "cases"
FRAME_CACHE = HERE / "zstd_frames.json"


def generate(out: Path, *, update_cache: bool = False) -> Suite:
    """Write every case under ``out`` (which must not exist); return the suite."""
    ocfbytes.FRAMES = ocfbytes.FrameCache(FRAME_CACHE)
    suite = Suite(out)
    cases_read.generate(suite)
    cases_reject.generate(suite)
    cases_write.generate(suite)
    cases_merge.generate(suite)
    cases_protobuf.generate(suite)
    cases_wire.generate(suite)
    cases_pool.generate(suite)
    frames = ocfbytes.FRAMES
    if update_cache:
        frames.save()
    elif frames.missing:
        raise SystemExit(f"{len(frames.missing)} zstd frames are not in {FRAME_CACHE.name}; "
                         "run again with --update-zstd-cache and commit the cache")
    return suite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="directory to (re)create (default: conformance/cases)")
    parser.add_argument("--update-zstd-cache", action="store_true",
                        help="record zstd frames missing from zstd_frames.json")
    args = parser.parse_args(argv)
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    suite = generate(out, update_cache=args.update_zstd_cache)
    groups: dict[str, int] = {}
    for case_id in suite.ids:
        group = case_id.split(".", 1)[0]
        groups[group] = groups.get(group, 0) + 1
    summary = ", ".join(f"{groups[g]} {g}" for g in sorted(groups))
    print(f"wrote {len(suite.ids)} cases ({summary}) to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
