"""Crash safety of the commit protocol (spec/commit.md), with real processes and SIGKILL.

A child process writes a large checkpoint (13 tensors of 16 MiB) to a target
path; the parent kills it with SIGKILL at chosen moments, found by watching
the files it writes (never by fixed sleeps alone), or after a random delay.
Then, whatever the moment:

* the target holds exactly what it held before (nothing, or the earlier
  checkpoint, bit for bit), or exactly the new checkpoint if the kill came
  after the commit; never a readable checkpoint with other content;
* the unrelated checkpoint beside it is untouched;
* the only other files are leftovers a reader ignores: temporary names (a
  leading "." and ".ocf-tmp-") and shards the index does not reference;
* the next save to the same target succeeds, and in the directory form it
  removes the leftovers.

SIGKILL tests the order of the steps of a commit (nothing is published
before it is complete), not durability across power loss: the killed
process's writes stay in the page cache. The last tests therefore trace a
real write with strace (skipped without it) and check that every file is
fsynced before the rename that publishes it, and the directory after.

The random delays come from a seed printed with every failure; set
OCF_CRASH_SEED to replay one.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers import INDEX_FILE_NAME, big_values, index_of
from repo_paths import TESTS_DIR
from strace_support import Call, needs_strace, traced_calls

import ocf

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

SEED = int(os.environ.get("OCF_CRASH_SEED", time.time_ns() % (1 << 32)))
NEW_SEED = 2  # seed of the values the child writes (big_values)
MAX_SHARD_SIZE = 48 << 20  # directory form: about 3 tensors per shard, 5 shards
NEW_BYTES = 13 * 4 * (4 << 20)  # big_values: 13 uint32 tensors of 4 Mi elements

@pytest.fixture(autouse=True)
def _free_disk_space(tmp_path: Path) -> Iterator[None]:
    """Each scenario leaves up to a few hundred MiB: remove them once it is checked."""
    yield
    shutil.rmtree(tmp_path / "models", ignore_errors=True)


CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from helpers import big_values
    import ocf

    target, layout = sys.argv[2], sys.argv[3]
    arrays = big_values(int(sys.argv[4]))
    print("ready", flush=True)
    with ocf.Writer(target, layout=layout, max_shard_size=int(sys.argv[5]),
                    metadata={"version": "new"}) as writer:
        for key, array in arrays.items():
            writer.write(key, array)
    print("committed", flush=True)
""")


# The same write as CHILD, through an asynchronous save_file.
ASYNC_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from helpers import big_values
    import ocf

    target, layout = sys.argv[2], sys.argv[3]
    arrays = big_values(int(sys.argv[4]))
    print("ready", flush=True)
    ocf.save_file(arrays, target, layout=layout, max_shard_size=int(sys.argv[5]),
                  metadata={"version": "new"}, blocking=False).wait()
    print("committed", flush=True)
""")


def _temp(name: str) -> bool:
    """A temporary name of the commit protocol [R-COMMIT-001]."""
    return name.startswith(".") and ".ocf-tmp-" in name


def _small(tag: int) -> dict[str, np.ndarray]:
    """Values of the earlier checkpoints: the same keys as the new one, other shapes."""
    return {f"t{i:02d}": np.full(16 + i, tag * 1000 + i, dtype=np.uint32) for i in range(13)}


def _fingerprint(path: Path) -> dict[str, str]:
    """SHA-256 of every file of a checkpoint (a file, or a directory's files)."""
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _new_values() -> dict[str, np.ndarray]:
    return big_values(NEW_SEED)


def holds(path: Path, values: Callable[[], dict[str, np.ndarray]] | dict[str, np.ndarray],
          version: str) -> bool:
    """True when ``path`` is a checkpoint of exactly ``values`` with metadata ``version``.

    Opens and reads with checksums; any OCFError propagates (a damaged
    checkpoint is neither the old nor the new one).
    """
    with ocf.Reader(path) as reader:
        if reader.metadata.get("version") != version:
            return False
        expected = values() if callable(values) else values
        if sorted(reader) != sorted(expected):
            return False
        for key, array in expected.items():
            got = reader.get_tensor(key)
            if got.dtype != array.dtype or got.shape != array.shape or not np.array_equal(
                    got, array):
                return False
        reader.verify_all()
    return True


# -- running and killing the writer -------------------------------------------------


@dataclass
class Watch:
    """The files of the child's write, as seen by the parent while polling.

    A file counts when it is new, or when an existing one changed (other
    inode, size or modification time): a writer that wrote in place would
    show up too.
    """

    folder: Path  # where the write's files appear (it may not exist yet)

    def __post_init__(self) -> None:
        self.before = self._stats()

    def _stats(self) -> dict[str, tuple[int, int, int]]:
        found = {}
        try:
            entries = list(os.scandir(self.folder))
        except FileNotFoundError:
            return {}
        for entry in entries:
            try:
                info = entry.stat()
            except FileNotFoundError:  # renamed or removed meanwhile
                continue
            found[entry.name] = (info.st_ino, info.st_size, info.st_mtime_ns)
        return found

    def new_files(self) -> dict[str, int]:
        """Name and size of every file that appeared or changed since the start."""
        return {name: stat[1] for name, stat in self._stats().items()
                if self.before.get(name) != stat}


Trigger = Callable[[dict[str, int], float], bool]


def appeared(files: dict[str, int], _: float) -> bool:
    return bool(files)


def grown(files: dict[str, int], _: float) -> bool:
    return sum(files.values()) >= NEW_BYTES // 3


def data_written(files: dict[str, int], _: float) -> bool:
    """All tensor bytes are out: the write is flushing, fsyncing or writing the index."""
    return sum(size for name, size in files.items() if not name.startswith(".index.ocf")) \
        >= NEW_BYTES


def index_temp(files: dict[str, int], _: float) -> bool:
    return any(name.startswith(".index.ocf") for name in files)


def after(delay: float) -> Trigger:
    return lambda _, elapsed: elapsed >= delay


def run_and_kill(target: Path, layout: str, trigger: Trigger, watch: Watch, *,
                 child_code: str = CHILD) -> str:
    """Run the writing child and SIGKILL it when ``trigger`` fires.

    Returns "killed", or "finished" when the child committed before the
    trigger fired.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", child_code, str(TESTS_DIR), str(target), layout, str(NEW_SEED),
         str(MAX_SHARD_SIZE)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # the values are made; the write starts now
        assert line == "ready\n", child.communicate()[1]
        start = time.monotonic()
        while child.poll() is None:
            elapsed = time.monotonic() - start
            assert elapsed < 30, "the writing child neither finished nor triggered"
            if trigger(watch.new_files(), elapsed):
                child.send_signal(signal.SIGKILL)
                break
            time.sleep(0.0005)
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if child.returncode == 0:
        return "finished"
    assert child.returncode == -signal.SIGKILL, err
    return "killed"


# -- the scenarios ------------------------------------------------------------------


@dataclass
class Scene:
    """A folder with an unrelated checkpoint beside the target."""

    folder: Path
    target: Path
    beside: Path
    beside_print: dict[str, str]


def _scene(tmp_path: Path, layout: str, *, existing: bool) -> Scene:
    folder = tmp_path / "models"
    folder.mkdir()
    suffix = ".ocf" if layout == "file" else ""
    beside = folder / f"beside{suffix}"
    ocf.save_file(_small(7), beside, layout=layout, metadata={"version": "beside"})
    target = folder / f"target{suffix}"
    if existing:
        ocf.save_file(_small(1), target, layout=layout, metadata={"version": "old"})
    return Scene(folder, target, beside, _fingerprint(beside))


def _check_beside(scene: Scene) -> None:
    assert _fingerprint(scene.beside) == scene.beside_print, "the checkpoint beside changed"
    assert holds(scene.beside, _small(7), "beside")


def _check_leftovers(scene: Scene, layout: str) -> None:
    """Every file not part of a committed checkpoint is a leftover a reader ignores."""
    if layout == "file":
        names = {p.name for p in scene.folder.iterdir()}
        extra = names - {scene.target.name, scene.beside.name}
        assert all(_temp(name) for name in extra), f"unexpected files: {sorted(extra)}"
        return
    assert {p.name for p in scene.folder.iterdir()} <= {scene.target.name, scene.beside.name}
    if not scene.target.exists():
        return
    names = {p.name for p in scene.target.iterdir()}
    referenced = set()
    if INDEX_FILE_NAME in names:
        referenced = {s.path for s in index_of((scene.target / INDEX_FILE_NAME).read_bytes())
                      .shards}
    extra = names - referenced - {INDEX_FILE_NAME}
    assert all(_temp(name) or (name.startswith("data-") and name.endswith(".ocfd"))
               for name in extra), f"unexpected files: {sorted(extra)}"


def _save_again_and_check(scene: Scene, layout: str) -> None:
    """The next save to the same target works; in the directory form it clears leftovers."""
    ocf.save_file(_small(3), scene.target, layout=layout, metadata={"version": "again"})
    assert holds(scene.target, _small(3), "again")
    if layout == "directory":
        referenced = {s.path for s in index_of((scene.target / INDEX_FILE_NAME).read_bytes())
                      .shards}
        assert {p.name for p in scene.target.iterdir()} == referenced | {INDEX_FILE_NAME}
    # The killed writes' temporary files of the target are gone too [R-COMMIT-004].
    assert {p.name for p in scene.folder.iterdir()} == {scene.target.name, scene.beside.name}
    _check_beside(scene)


def _delay(name: str) -> float:
    """A random delay after the write starts, from SEED (shown in failure messages)."""
    # Writing the 208 MiB takes about 0.1 to 0.5 s here (page cache, then fsync):
    # most delays land inside the write, some after the commit.
    return random.Random(f"{SEED}-{name}").uniform(0.0, 0.5)


def _trigger(name: str) -> Trigger:
    named: dict[str, Trigger] = {"appeared": appeared, "grown": grown,
                                 "data_written": data_written, "index_temp": index_temp}
    return named[name] if name in named else after(_delay(name))


def _check_old_or_new(target: Path, outcome: str, context: str) -> None:
    """The target holds exactly the old checkpoint or, once committed, exactly the new one."""
    is_old = holds(target, _small(1), "old")
    is_new = not is_old and holds(target, _new_values, "new")
    assert is_old or is_new, f"{context}: the target is neither the old nor the new checkpoint"
    if outcome == "finished":
        assert is_new, f"{context}: the child committed but the target is the old checkpoint"


# Triggers that fire while tensor bytes are still being written: the commit
# cannot have happened yet, so the target must be exactly as it was.
EARLY = {"appeared", "grown"}


@pytest.mark.parametrize("moment", ["grown", "random_1"])
@pytest.mark.parametrize("layout", ["file", "directory"])
def test_killed_first_write_leaves_no_checkpoint_or_the_complete_new_one(
    tmp_path: Path, layout: str, moment: str,
) -> None:
    scene = _scene(tmp_path, layout, existing=False)
    watch = Watch(scene.folder if layout == "file" else scene.target)
    outcome = run_and_kill(scene.target, layout, _trigger(moment), watch)
    context = f"seed {SEED}, {moment}: child {outcome}"
    if outcome == "killed" and moment in EARLY:
        assert layout == "directory" or not scene.target.exists(), context
        with pytest.raises(ocf.NotFoundError):
            ocf.Reader(scene.target)
    else:
        try:
            assert holds(scene.target, _new_values, "new"), context
        except ocf.NotFoundError:
            assert outcome == "killed", context
    _check_leftovers(scene, layout)
    _check_beside(scene)
    _save_again_and_check(scene, layout)


@pytest.mark.parametrize("moment", ["appeared", "grown", "data_written", "random_1",
                                    "random_2", "random_3", "random_4"])
def test_killed_overwrite_of_a_single_file_keeps_the_old_checkpoint(
    tmp_path: Path, moment: str,
) -> None:
    scene = _scene(tmp_path, "file", existing=True)
    old_print = _fingerprint(scene.target)
    watch = Watch(scene.folder)
    outcome = run_and_kill(scene.target, "file", _trigger(moment), watch)
    context = f"seed {SEED}, {moment}: child {outcome}"
    if outcome == "killed" and moment in EARLY:
        assert _fingerprint(scene.target) == old_print, context
        assert holds(scene.target, _small(1), "old"), context
    else:
        _check_old_or_new(scene.target, outcome, context)
    _check_leftovers(scene, "file")
    _check_beside(scene)
    _save_again_and_check(scene, "file")


@pytest.mark.parametrize("child_code", [CHILD, ASYNC_CHILD], ids=["blocking", "async"])
def test_temporary_files_of_repeated_killed_single_file_saves_do_not_pile_up(
    tmp_path: Path, child_code: str,
) -> None:
    scene = _scene(tmp_path, "file", existing=True)
    kills = 0
    for _ in range(3):
        outcome = run_and_kill(scene.target, "file", grown, Watch(scene.folder),
                               child_code=child_code)
        kills += outcome == "killed"
    temps = [p for p in scene.folder.iterdir() if _temp(p.name)]
    assert len(temps) == kills, f"each killed save leaves its temporary file: {temps}"
    _save_again_and_check(scene, "file")  # which removes them all


@pytest.mark.parametrize("moment", ["appeared", "grown", "data_written", "index_temp",
                                    "random_1", "random_2", "random_3", "random_4"])
def test_killed_overwrite_of_a_directory_checkpoint_keeps_the_old_checkpoint(
    tmp_path: Path, moment: str,
) -> None:
    scene = _scene(tmp_path, "directory", existing=True)
    old_print = _fingerprint(scene.target)
    watch = Watch(scene.target)
    outcome = run_and_kill(scene.target, "directory", _trigger(moment), watch)
    context = f"seed {SEED}, {moment}: child {outcome}"
    if outcome == "killed" and moment in EARLY:
        # Nothing the old index references was touched [R-COMMIT-004].
        now = _fingerprint(scene.target)
        assert {name: now.get(name) for name in old_print} == old_print, context
        assert holds(scene.target, _small(1), "old"), context
    else:
        _check_old_or_new(scene.target, outcome, context)
    _check_leftovers(scene, "directory")
    _check_beside(scene)
    _save_again_and_check(scene, "directory")


# -- the order of the commit's system calls (see strace_support.py) ----------------

TRACED = ("openat", "fsync", "fdatasync", "rename", "renameat", "renameat2", "mkdir", "mkdirat")
WRITE_SMALL = textwrap.dedent("""
    import sys
    import numpy as np
    import ocf
    ocf.save_file({"a": np.arange(600, dtype=np.int64), "b": np.arange(300, dtype=np.int32)},
                  sys.argv[1], layout=sys.argv[2], max_shard_size=4096)
""")


def _trace(tmp_path: Path, target: Path, layout: str) -> list[Call]:
    return traced_calls(tmp_path / "strace.log", TRACED,
                        [sys.executable, "-c", WRITE_SMALL, str(target), layout])


def _first(calls: list[Call], after: int, test: Callable[[Call], bool], what: str) -> int:
    for i in range(after + 1, len(calls)):
        if calls[i].result >= 0 and test(calls[i]):
            return i
    raise AssertionError(f"no {what} after call {after}: {calls[after:]}")


def _synced(path: Path) -> Callable[[Call], bool]:
    return lambda c: c.name in ("fsync", "fdatasync") and c.paths == (str(path),)


def _renamed(source: str, target: Path) -> Callable[[Call], bool]:
    return lambda c: c.name.startswith("rename") and c.paths == (source, str(target))


@needs_strace
def test_single_file_commit_fsyncs_the_file_before_the_rename_and_the_directory_after(
    tmp_path: Path,
) -> None:
    target = tmp_path / "model.ocf"
    calls = _trace(tmp_path, target, "file")
    opened = _first(calls, -1, lambda c: c.name == "openat" and "O_CREAT" in c.flags
                    and Path(c.paths[-1]).parent == tmp_path, "file creation")
    temp = calls[opened].paths[-1]
    assert _temp(Path(temp).name)
    assert "O_EXCL" in calls[opened].flags
    synced = _first(calls, opened, _synced(Path(temp)), "fsync of the temporary file")
    renamed = _first(calls, synced, _renamed(temp, target), "rename onto the target")
    _first(calls, renamed, _synced(tmp_path), "fsync of the directory")


@needs_strace
@pytest.mark.parametrize("existing", [False, True])
def test_directory_commit_makes_shards_and_index_durable_before_the_rename(
    tmp_path: Path, existing: bool,
) -> None:
    target = tmp_path / "model"
    if existing:
        ocf.save_file({"old": np.arange(3)}, target, layout="directory")
    calls = _trace(tmp_path, target, "directory")
    if not existing:  # step 1: create D, then fsync the directory holding it
        made = _first(calls, -1, lambda c: c.name.startswith("mkdir")
                      and c.paths[-1] == str(target), "mkdir of the directory")
        _first(calls, made, _synced(tmp_path), "fsync of the directory holding it")
    created = [i for i, c in enumerate(calls) if c.name == "openat" and "O_CREAT" in c.flags
               and Path(c.paths[-1]).parent == target]
    names = [Path(calls[i].paths[-1]).name for i in created]
    assert all("O_EXCL" in calls[i].flags for i in created), names
    shards = [i for i, name in zip(created, names) if name.endswith(".ocfd")]
    temps = [i for i, name in zip(created, names) if _temp(name)]
    assert len(shards) == 2
    assert len(temps) == 1
    temp = calls[temps[0]].paths[-1]
    renamed = _first(calls, temps[0], _renamed(temp, target / INDEX_FILE_NAME),
                     "rename to index.ocf")
    for i in [*shards, temps[0]]:  # steps 4 and 5: every new file fsynced before step 7
        synced = _first(calls, i, _synced(Path(calls[i].paths[-1])), "fsync")
        assert synced < renamed, calls[i]
    # Step 6: fsync D after the last new file was created, before the rename.
    dir_synced = _first(calls, max(shards + temps), _synced(target), "fsync of the directory")
    assert dir_synced < renamed
    _first(calls, renamed, _synced(target), "fsync of the directory after the rename")
