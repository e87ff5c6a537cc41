"""The committed protobuf code is what the .proto files generate."""

from __future__ import annotations

import subprocess
import sys

from repo_paths import PYTHON_DIR

TOOLS = PYTHON_DIR / "tools"


def test_generated_protobuf_code_is_up_to_date() -> None:
    done = subprocess.run([sys.executable, str(TOOLS / "gen_proto.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
