"""What the incremental-save tests share (test_incremental*.py, and the child
processes of the SIGKILL test, which import this module): the values of
numbered saves, and the full verification of every checkpoint in a root."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import ocf
from ocf.format.pool import POOL_DIRECTORY
from ocf.format.pool_gc import referenced_objects

TESTS_DIR = Path(__file__).resolve().parent
ROWS, COLUMNS = 8192, 512  # float32: 16 MiB, sixteen bands of 1 MiB
CHANGED_ROWS = 50


def link_threshold(base_file_size: int) -> int:
    """The unchanged bytes of a base's own file that a save must find before it links
    the file into the pool (spec/pool.md, informative): 1 MiB, and a 16th of the file.
    Until then unchanged blocks are rewritten, so a save writes at most this much more
    than what changed."""
    return max(1 << 20, base_file_size // 16)


def rows_changed_by(number: int) -> slice:
    """The rows save ``number`` changes: a cluster, somewhere different each time."""
    start = (number * 997) % (ROWS - CHANGED_ROWS)
    return slice(start, start + CHANGED_ROWS)


def state_for(number: int) -> dict[str, np.ndarray]:
    """The tensors of save ``number``: a frozen matrix, a table whose rows change in
    clusters, and the number itself."""
    rng = np.random.default_rng(7)
    frozen = rng.standard_normal((1024, 1024)).astype(np.float32)
    table = rng.standard_normal((ROWS, COLUMNS)).astype(np.float32)
    for earlier in range(1, number + 1):
        table[rows_changed_by(earlier)] = float(earlier)
    return {"frozen": frozen, "table": table, "number": np.array(number, np.int64)}


def verify_fully(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Open ``path``, check every pool object it references against its SHA-256 and
    read every tensor (every chunk CRC checked): what ``ocf verify`` does."""
    with ocf.Reader(path) as reader:
        reader.check_pool_identities()
        # An ocf.Checkpoint names "table" "table/.value": the values by their first name.
        return {key.split("/")[0]: reader.read_tensor(key) for key in reader}


def assert_root_consistent(root: Path, *, leftovers_allowed: bool) -> list[Path]:
    """Every checkpoint file in ``root`` passes a full verification and holds the values
    of its number; the pool holds every object they list (and, unless
    ``leftovers_allowed``, nothing else). Returns the checkpoints."""
    if not root.exists():
        return []  # killed before its first save made the directory
    checkpoints = sorted((p for p in root.iterdir() if p.name.startswith("ckpt-")),
                         key=lambda p: int(p.name.split("-")[1]))
    for path in checkpoints:
        values = verify_fully(path)
        number = int(values["number"])
        assert path.name == f"ckpt-{number}"
        expected = state_for(number)
        for key in ("frozen", "table"):
            np.testing.assert_array_equal(values[key], expected[key], err_msg=f"{path} {key}")
    referenced = referenced_objects(root)
    assert referenced is not None
    pool = set(os.listdir(root / POOL_DIRECTORY)) if (root / POOL_DIRECTORY).exists() else set()
    assert referenced <= pool, f"missing pool objects: {sorted(referenced - pool)}"
    if not leftovers_allowed:
        assert pool == referenced, f"leftovers: {sorted(pool - referenced)}"
    return checkpoints


def stored_in_own_file(path: str | os.PathLike[str]) -> int:
    """The stored bytes of the blocks that the checkpoint ``path`` keeps in its own file,
    not in the pool: what its save wrote besides the index."""
    with ocf.Reader(path) as reader:
        own = {number for number, shard in enumerate(reader.index.shards)
               if not shard.pool_sha256}
        blocks = []
        for info in reader.index.tensors.values():
            blocks += [info.block] if info.block is not None else [s.block for s in info.slices]
        return sum(block.stored_length for block in blocks if block.shard in own)
