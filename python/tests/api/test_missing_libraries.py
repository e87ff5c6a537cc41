"""A library a path or a command needs and that is not installed: a clear error at the
place that needs it, never a traceback, and no ImportError special case in the CLI.

Each case runs in a child process in which ``import`` of the library fails,
as if it were not installed. The Orbax case is in test_orbax.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import ocf

_BLOCKED = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # as if it were not installed
import ocf
from ocf.cli.main import main
if sys.argv[2] == "open":
    try:
        ocf.open(sys.argv[3])
    except ocf.InvalidError as exc:
        print("InvalidError:", exc)
    sys.exit(0)
sys.exit(main(sys.argv[3:]))
"""


def _without(modules: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _BLOCKED, modules, *arguments],
                          capture_output=True, text=True, check=False, timeout=300)


def test_an_s3_path_without_s3fs_is_invalid_naming_the_path_and_the_extra() -> None:
    message = ("INVALID: s3://bucket/ckpt.ocf: s3:// paths need their fsspec backend, which "
               "is not installed (Install s3fs to access S3; pip install 'ocf[s3]')")
    opened = _without("s3fs", "open", "s3://bucket/ckpt.ocf")
    assert opened.stdout == f"InvalidError: {message}\n", opened.stderr
    done = _without("s3fs", "cli", "inspect", "s3://bucket/ckpt.ocf")
    assert (done.returncode, done.stderr.splitlines()) == (1, [message])


def test_an_s3_path_without_fsspec_is_invalid_naming_the_path_and_the_extra() -> None:
    done = _without("fsspec,fsspec.core", "cli", "verify", "s3://bucket/ckpt.ocf")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "INVALID: s3://bucket/ckpt.ocf: checkpoints on object stores need fsspec, which is "
        "not installed (pip install 'ocf[s3]')"]


def test_ocf_report_without_matplotlib_names_what_to_install(tmp_path: Path) -> None:
    path = tmp_path / "model.ocf"
    ocf.save_file({"w": np.ones(3, np.float32)}, path)
    done = _without("matplotlib", "cli", "report", str(path), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "ocf report: ocf report draws with matplotlib, which is not installed: "
        "pip install 'ocf[report]'"]
    assert not (tmp_path / "r.html").exists()
