"""BundleWriter's commit: an index never describes data other than its own, even when a
checkpoint is overwritten and the writer is killed (SIGKILL, injected by strace) at
any step of finish(); and the order of its fsyncs, renames and unlinks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bundle_files import (
    SRC,
)
from strace_support import STRACE, needs_strace

from ocf.tensorflow import (
    BundleReader,
)

# The writer's commit: an index never describes data other than its own, even when a
# checkpoint is overwritten and the writer is killed at any step of finish().

WRITE_TAGGED = """
import sys
import numpy as np
from ocf.tensorflow import BundleWriter

def values(tag):
    # Tag 1 and 2 have the same keys and as many data files (4 KiB each, so their
    # names collide), other dtypes and values.
    dtype = np.float32 if tag == 1 else np.float64
    return {k: np.full(4096 // np.dtype(dtype).itemsize, 10 * tag + i, dtype)
            for i, k in enumerate("abc")}

if __name__ == "__main__":
    with BundleWriter(sys.argv[1], max_shard_bytes=4096) as writer:
        for key, array in values(int(sys.argv[2])).items():
            writer.add(key, array)
"""


def tagged_values(tag: int) -> dict[str, np.ndarray]:
    scope: dict[str, Any] = {}
    exec(WRITE_TAGGED, scope)  # the child's own definition of the values
    values: dict[str, np.ndarray] = scope["values"](tag)
    return values


def write_tagged(prefix: Path, tag: int, *strace: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", WRITE_TAGGED, str(prefix), str(tag)]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([*strace, *command], capture_output=True, text=True, env=env,
                          check=False)


def held(prefix: Path) -> str:
    """"none" without an index, else which values ("old" or "new") it holds, exactly."""
    if not Path(f"{prefix}.index").exists():
        return "none"
    with BundleReader(prefix) as reader:  # any OCFError fails the test
        got = {key: reader.read(key) for key in reader}
    for name, tag in (("old", 1), ("new", 2)):
        expected = tagged_values(tag)
        if sorted(got) == sorted(expected) and all(
                got[k].dtype == v.dtype and np.array_equal(got[k], v)
                for k, v in expected.items()):
            return name
    raise AssertionError(f"{prefix} holds neither the old nor the new values: {got}")


@needs_strace
@pytest.mark.parametrize("syscalls", ["?unlink,?unlinkat", "?rename,?renameat,?renameat2",
                                      "fsync,fdatasync"])
def test_killed_overwrite_never_leaves_an_index_describing_other_data(
    tmp_path: Path, syscalls: str
) -> None:
    # SIGKILL on entry to the k-th call (the call does not happen), for every k
    # until the writer finishes: every point between two steps of finish().
    outcomes = []
    for k in range(1, 60):
        shutil.rmtree(tmp_path / "d", ignore_errors=True)
        prefix = tmp_path / "d" / "ckpt"
        assert write_tagged(prefix, 1).returncode == 0
        assert held(prefix) == "old"
        run = write_tagged(prefix, 2, str(STRACE), "-qq", "-o", os.devnull,
                           "-e", f"trace={syscalls}",
                           "-e", f"inject={syscalls}:signal=SIGKILL:when={k}")
        outcomes.append(held(prefix))
        if run.returncode == 0:
            break
        assert run.returncode in (-9, 128 + 9), run.stderr  # strace dies as its child did
    else:
        raise AssertionError("the writer never finished")
    assert outcomes[-1] == "new"
    if syscalls.startswith("?unlink"):
        assert outcomes[:-1] == ["old"]  # the old index is removed, nothing before
    else:
        assert "none" in outcomes
    assert write_tagged(prefix, 2).returncode == 0  # and the next write succeeds
    assert held(prefix) == "new"


@needs_strace
def test_finish_fsyncs_files_and_directory_and_removes_the_old_index_first(
    tmp_path: Path,
) -> None:
    prefix = tmp_path / "ckpt"
    assert write_tagged(prefix, 1).returncode == 0
    log = tmp_path / "strace.log"
    traced = "openat,fsync,fdatasync,?rename,?renameat,?renameat2,?unlink,?unlinkat"
    run = write_tagged(prefix, 2, str(STRACE), "-qq", "-y", "-o", str(log),
                       "-e", f"trace={traced}")
    assert run.returncode == 0, run.stderr
    calls: list[tuple[str, tuple[str, ...]]] = []
    for line in log.read_text().splitlines():
        match = re.match(r"^(\w+)\((.*)\)\s+=\s+(-?\d+)", line)
        if match is None or int(match[3]) < 0:
            continue
        name, args = match[1], match[2]
        pattern = r"^\d+<([^>]*)>" if name in ("fsync", "fdatasync") else r'"([^"]*)"'
        calls.append((name, tuple(re.findall(pattern, args))))

    def first(name: str, paths: tuple[str, ...]) -> int:
        hits = [i for i, (n, p) in enumerate(calls) if n.startswith(name) and p == paths]
        assert hits, (name, paths, calls)
        return hits[0]

    def synced_between(path: str, after: int, before: int) -> bool:
        return any(n in ("fsync", "fdatasync") and p == (path,)
                   for n, p in calls[after + 1 : before])

    index = f"{prefix}.index"
    removed = first("unlink", (index,))
    renames = [(i, p) for i, (n, p) in enumerate(calls) if n.startswith("rename")]
    data = [(i, p) for i, p in renames if ".data-" in p[1]]
    assert [Path(p[1]).name for _, p in data] == [
        f"ckpt.data-0000{i}-of-00003" for i in range(3)]
    published = first("rename", (renames[-1][1][0], index))
    assert renames[-1][0] == published  # the index is renamed last
    directory = str(tmp_path)
    assert synced_between(directory, removed, data[0][0])
    assert synced_between(directory, data[-1][0], published)
    assert synced_between(directory, published, len(calls))
    for i, (temp, _) in [*data, (published, renames[-1][1])]:
        assert synced_between(temp, -1, i), temp  # every file is durable before its rename
