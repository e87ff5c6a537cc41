"""ocf.format.folder_commit: a folder published whole, replacing the previous one whole.

The crash tests of the folders that use it are in test_huggingface_crash.py;
these pin the states a crash leaves and what the next write does with them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ocf.format.errors import InvalidError
from ocf.format.folder_commit import StagedFolder, folder_names, remove_leftovers


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).write_text(text)


def _contents(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir()}


def test_a_new_folder_appears_only_at_its_commit(tmp_path: Path) -> None:
    staged = StagedFolder(tmp_path / "runs" / "step-1")
    staged.create()
    _write(staged.folder, {"a": "1", "b": "1"})
    assert not (tmp_path / "runs" / "step-1").exists()
    assert staged.folder.name == "step-1"  # written under its own name, inside the hidden one
    staged.commit()
    assert os.listdir(tmp_path / "runs") == ["step-1"]
    assert _contents(tmp_path / "runs" / "step-1") == {"a": "1", "b": "1"}


def test_a_commit_replaces_a_folder_of_the_writers_own_entries_whole(tmp_path: Path) -> None:
    target = tmp_path / "latest"
    target.mkdir()
    _write(target, {"a": "old", "stale": "old"})
    staged = StagedFolder(target, own_entries="a|stale")
    staged.create()
    _write(staged.folder, {"a": "new"})
    assert _contents(target) == {"a": "old", "stale": "old"}
    staged.commit()
    assert _contents(target) == {"a": "new"}
    assert os.listdir(tmp_path) == ["latest"]


def test_a_discarded_write_leaves_the_previous_folder(tmp_path: Path) -> None:
    target = tmp_path / "latest"
    target.mkdir()
    _write(target, {"a": "old"})
    staged = StagedFolder(target)
    staged.create()
    _write(staged.folder, {"a": "half"})
    staged.discard()
    assert os.listdir(tmp_path) == ["latest"]
    assert _contents(target) == {"a": "old"}


def test_leftovers_of_killed_writes_are_deleted_and_nothing_else(tmp_path: Path) -> None:
    for number in (3, 4):
        killed = StagedFolder(tmp_path / f"checkpoint-{number}")
        killed.create()
        _write(killed.folder, {"model": "half"})
    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / ".other.ocf-tmp-0123456789abcdef").mkdir()  # not a checkpoint-N leftover
    (tmp_path / "notes").write_text("mine")
    remove_leftovers(tmp_path, folder_names("checkpoint"))
    assert sorted(os.listdir(tmp_path)) == [".other.ocf-tmp-0123456789abcdef", "checkpoint-2",
                                            "notes"]


def test_a_replacement_killed_between_its_two_renames_gets_the_old_folder_back(
        tmp_path: Path) -> None:
    """Without an atomic exchange the old folder is moved aside first; a kill right
    after that leaves no folder at the name, and the next write moves it back."""
    target = tmp_path / "latest"
    staged = StagedFolder(target)
    staged.create()
    _write(staged.folder, {"a": "new"})
    aside = staged.staging / "latest.previous"  # where the fallback moves the old folder
    aside.mkdir()
    _write(aside, {"a": "old"})
    remove_leftovers(tmp_path, "latest")
    assert os.listdir(tmp_path) == ["latest"]
    assert _contents(target) == {"a": "old"}


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_target_that_is_not_a_folder_is_refused_and_kept(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "latest"
    if kind == "file":
        target.write_text("keep me")
    else:
        (tmp_path / "elsewhere").mkdir()
        target.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InvalidError, match=r"latest: a checkpoint folder is written here, "
                                           r"and this path exists and is not a folder"):
        StagedFolder(target).create()
    assert target.is_symlink() if kind == "symlink" else target.read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == sorted(["latest"] + (["elsewhere"] if
                                                                  kind == "symlink" else []))


def test_a_commit_that_must_not_replace_keeps_a_folder_that_appeared_meanwhile(
        tmp_path: Path) -> None:
    target = tmp_path / "out"
    staged = StagedFolder(target)
    staged.create()
    _write(staged.folder, {"a": "new"})
    target.mkdir()  # another program made it after the caller checked
    _write(target, {"a": "theirs"})
    with pytest.raises(OSError, match="not empty"):  # ENOTEMPTY
        staged.commit(replace=False)
    staged.discard()
    assert os.listdir(tmp_path) == ["out"]
    assert _contents(target) == {"a": "theirs"}


def test_a_folder_holding_entries_the_writer_does_not_write_is_refused_before_writing(
        tmp_path: Path) -> None:
    target = tmp_path / "latest"
    target.mkdir()
    _write(target, {"a": "old", "notes.txt": "mine"})
    (target / "data").mkdir()
    with pytest.raises(InvalidError, match=r"latest: a checkpoint folder is replaced whole, "
                                           r"and this one holds entries the save does not "
                                           r"write \(data, notes.txt\)"):
        StagedFolder(target, own_entries="a").create()
    assert os.listdir(tmp_path) == ["latest"]
    assert sorted(os.listdir(target)) == ["a", "data", "notes.txt"]
    assert (target / "notes.txt").read_text() == "mine"


def test_an_entry_that_appears_during_the_write_stops_the_replacement(tmp_path: Path) -> None:
    target = tmp_path / "latest"
    target.mkdir()
    _write(target, {"a": "old"})
    staged = StagedFolder(target, own_entries="a")
    staged.create()
    _write(staged.folder, {"a": "new"})
    _write(target, {"notes.txt": "written meanwhile"})
    with pytest.raises(InvalidError, match=r"holds entries the save does not write "
                                           r"\(notes.txt\)"):
        staged.commit()
    staged.discard()
    assert os.listdir(tmp_path) == ["latest"]
    assert _contents(target) == {"a": "old", "notes.txt": "written meanwhile"}


@pytest.mark.parametrize("name", [".", "..", "sub/..", "./."])
def test_a_folder_named_by_dot_or_dot_dot_is_refused(name: str) -> None:
    with pytest.raises(InvalidError, match=r"names a folder by '.' or '..'"):
        StagedFolder(name)


@pytest.mark.parametrize("which", ["working", "its parent", "through a linked parent"])
def test_the_working_directory_and_a_folder_holding_it_are_never_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    working = tmp_path / "run"
    working.mkdir()
    (tmp_path / "link").symlink_to(tmp_path)
    monkeypatch.chdir(working)
    target = {"working": working, "its parent": tmp_path,
              "through a linked parent": tmp_path / "link" / "run"}[which]
    with pytest.raises(InvalidError, match=r"is or holds the working directory"):
        StagedFolder(target).create()
    assert sorted(os.listdir(tmp_path)) == ["link", "run"]
    assert os.listdir(working) == []


def test_a_mount_point_is_refused_before_anything_is_written() -> None:
    mount = Path("/proc")  # a mount point on every Linux system
    if not os.path.ismount(mount):
        pytest.skip("/proc is not a mount point here")
    before = sorted(os.listdir("/"))
    with pytest.raises(InvalidError, match=r"/proc: .* is a mount point"):
        StagedFolder(mount).create()
    assert sorted(os.listdir("/")) == before


def test_a_folder_whose_name_holds_the_temporary_marker_gets_its_old_copy_back(
        tmp_path: Path) -> None:
    target = tmp_path / "run.ocf-tmp-1"
    staged = StagedFolder(target)
    staged.create()
    aside = staged.staging / "run.ocf-tmp-1.previous"  # a fallback replacement killed here
    aside.mkdir()
    _write(aside, {"a": "old"})
    remove_leftovers(tmp_path, r"run\.ocf-tmp-1")
    assert os.listdir(tmp_path) == ["run.ocf-tmp-1"]
    assert _contents(target) == {"a": "old"}


def test_a_fifo_in_the_folder_does_not_block_the_commit(tmp_path: Path) -> None:
    """Opening a FIFO to fsync it would wait for a writer forever: only regular
    files are synced. Run in a child so that a hang fails the test, not the suite."""
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from ocf.format.folder_commit import StagedFolder\n"
        "staged = StagedFolder(Path(sys.argv[1]) / 'out')\n"
        "staged.create()\n"
        "os.mkfifo(staged.folder / 'pipe')\n"
        "(staged.folder / 'a').write_text('new')\n"
        "staged.commit()\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, timeout=120)
    assert sorted(os.listdir(tmp_path / "out")) == ["a", "pipe"]
