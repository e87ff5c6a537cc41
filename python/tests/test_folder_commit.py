"""ocf.format.folder_commit: a folder published whole, replacing the previous one whole.

The crash tests of the folders that use it are in test_huggingface_crash.py;
these pin the states a crash leaves and what the next write does with them.
"""

from __future__ import annotations

import os
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


def test_a_commit_replaces_a_folder_whole_and_deletes_the_old_one(tmp_path: Path) -> None:
    target = tmp_path / "latest"
    target.mkdir()
    _write(target, {"a": "old", "stale": "old"})
    staged = StagedFolder(target)
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
