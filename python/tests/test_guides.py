"""The guides under docs/guides run: every ```python block of each page, in order, in a
fresh interpreter (the blocks of one page share it), as a reader would paste them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDES = Path(__file__).resolve().parents[2] / "docs" / "guides"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def code_of(page: Path) -> str:
    return "\n".join(BLOCK.findall(page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", sorted(p.name for p in GUIDES.glob("*.md")))
def test_the_guide_runs(page: str) -> None:
    code = code_of(GUIDES / page)
    assert code, f"{page} has no python example"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
