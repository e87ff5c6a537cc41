"""The README's Python example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from repo_paths import REPOSITORY

README = REPOSITORY / "README.md"


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README.md has no python example"
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
    assert (tmp_path / "model.ocf").is_file()
    assert (tmp_path / "ckpt" / "index.ocf").is_file()
