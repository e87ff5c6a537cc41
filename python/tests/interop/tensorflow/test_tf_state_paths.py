"""The paths a TensorFlow ``checkpoint`` state file names never lead a reader outside its
directory unless the caller asks [R-TF-001].

Each test puts a valid checkpoint outside the directory, where the old reader
would have read it, so that a refusal is visible as an error, and strace
shows that none of its files (nor ``/etc/passwd.index``) was opened or even
looked at.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_support import run
from strace_support import needs_strace, traced_calls

import ocf
from ocf.format.errors import InvalidError
from ocf.tensorflow import BundleWriter, TFSource, read_checkpoint_state

ESCAPES = ["../outside/ckpt", "OUTSIDE_ABSOLUTE", "/etc/passwd", "sub/../../outside/ckpt"]


def _bundle(prefix: Path, value: float = 1.0) -> Path:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with BundleWriter(prefix) as writer:
        writer.add("w", np.full(3, value, np.float32))
    return prefix


def _directory(tmp_path: Path, named: str) -> tuple[Path, str]:
    """``tmp_path/run``, whose state file names ``named`` (OUTSIDE_ABSOLUTE: the absolute
    prefix of a valid checkpoint outside it, at ``tmp_path/outside/ckpt``)."""
    outside = _bundle(tmp_path / "outside" / "ckpt", 7.0)
    run_dir = tmp_path / "run"
    _bundle(run_dir / "ckpt-1")
    (run_dir / "sub").mkdir()
    named = str(outside) if named == "OUTSIDE_ABSOLUTE" else named
    (run_dir / "checkpoint").write_text(
        f'model_checkpoint_path: "{named}"\nall_model_checkpoint_paths: "{named}"\n')
    return run_dir, named


@pytest.mark.parametrize("named", ESCAPES)
def test_state_file_naming_a_path_outside_its_directory_is_invalid_naming_file_and_path(
    tmp_path: Path, named: str
) -> None:
    run_dir, named = _directory(tmp_path, named)
    for open_it in (read_checkpoint_state, TFSource, ocf.list_variables):
        with pytest.raises(InvalidError, match="R-TF-001") as caught:
            open_it(run_dir)
        assert caught.value.path == str(run_dir / "checkpoint")
        assert repr(named) in caught.value.detail


def test_a_kept_path_outside_is_refused_even_when_the_latest_is_inside(tmp_path: Path) -> None:
    run_dir, _ = _directory(tmp_path, "ckpt-1")
    (run_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n'
                                        'all_model_checkpoint_paths: "../outside/ckpt"\n')
    with pytest.raises(InvalidError, match=re.escape("'../outside/ckpt'")):
        read_checkpoint_state(run_dir)


def test_a_symbolic_link_leading_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    run_dir, _ = _directory(tmp_path, "ckpt-1")
    os.symlink(tmp_path / "outside", run_dir / "link")
    (run_dir / "checkpoint").write_text('model_checkpoint_path: "link/ckpt"\n')
    with pytest.raises(InvalidError, match="'link/ckpt', outside the directory"):
        TFSource(run_dir)


def test_a_nul_byte_in_a_named_path_is_invalid_not_a_value_error(tmp_path: Path) -> None:
    run_dir, _ = _directory(tmp_path, "ckpt-1")
    (run_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt\\000-1"\n')
    with pytest.raises(InvalidError, match="NUL"):
        ocf.list_variables(run_dir)


def test_absolute_and_relative_paths_inside_the_directory_are_read(tmp_path: Path) -> None:
    run_dir, _ = _directory(tmp_path, "ckpt-1")
    inside = str(run_dir / "ckpt-1")
    for named in (inside, "ckpt-1", "sub/../ckpt-1", "./ckpt-1"):
        (run_dir / "checkpoint").write_text(f'model_checkpoint_path: "{named}"\n')
        with TFSource(run_dir) as source:
            np.testing.assert_array_equal(source.get_tensor("w"), np.ones(3, np.float32))


def test_a_directory_reached_through_a_symbolic_link_still_reads_its_own_checkpoints(
    tmp_path: Path
) -> None:
    run_dir, _ = _directory(tmp_path, "ckpt-1")
    os.symlink(run_dir, tmp_path / "alias")
    (run_dir / "checkpoint").write_text(f'model_checkpoint_path: "{run_dir / "ckpt-1"}"\n')
    assert ocf.list_variables(tmp_path / "alias") == [("w", "float32", (3,))]


def test_the_caller_may_allow_paths_outside_explicitly(tmp_path: Path) -> None:
    run_dir, _ = _directory(tmp_path, "../outside/ckpt")
    latest, kept = read_checkpoint_state(run_dir, allow_outside=True)
    assert latest == kept[0] == str(run_dir / "../outside/ckpt")
    with TFSource(run_dir, allow_outside=True) as source:
        np.testing.assert_array_equal(source.get_tensor("w"), np.full(3, 7.0, np.float32))


@pytest.mark.parametrize("named", ["../outside/ckpt", "/etc/passwd"])
def test_ocf_inspect_refuses_the_escape_naming_state_file_and_path(
    tmp_path: Path, named: str
) -> None:
    run_dir, named = _directory(tmp_path, named)
    done = run("inspect", str(run_dir))
    assert done.returncode == 1
    assert done.stderr.startswith(f"INVALID: {run_dir / 'checkpoint'}: ")
    assert repr(named) in done.stderr
    assert "[R-TF-001]" in done.stderr


@needs_strace
@pytest.mark.parametrize("named", ESCAPES)
def test_ocf_inspect_opens_no_file_outside_the_directory(tmp_path: Path, named: str) -> None:
    run_dir, named = _directory(tmp_path, named)
    code = ("import sys\nfrom ocf.cli.main import main\n"
            f"sys.exit(0 if main(['inspect', {str(run_dir)!r}]) == 1 else 3)\n")
    calls = traced_calls(tmp_path / "strace.log", ["open", "openat", "stat", "newfstatat"],
                         [sys.executable, "-c", code])
    opened = [path for call in calls if "open" in call.name for path in call.paths]
    assert str(run_dir / "checkpoint") in opened  # the trace does see the reader's opens
    assert not [p for p in opened if "outside" in p or p.startswith("/etc/passwd")]
    # Resolving symbolic links may look at the outside directory, never at its files.
    looked_at = [path for call in calls for path in call.paths]
    assert not [p for p in looked_at if (".index" in p and "outside" in p)
                or p.startswith("/etc/passwd")]
