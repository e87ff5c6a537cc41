"""The guides under docs/guides run: every ```python block of each page (the
troubleshooting pages of docs/guides/troubleshooting/ included), in order, as one
script in a fresh interpreter, as a reader would paste them into a file.

A script, not ``python -c``: the FSDP2 guide starts its ranks with
torch.multiprocessing, whose children import the script's functions by file.
A page that imports an optional framework this environment lacks (Keras
without TensorFlow, say) is skipped, naming it; any other failed import fails.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPOSITORY

GUIDES = REPOSITORY / "docs" / "guides"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
# The frameworks a guide may need that `pip install ocf` does not bring.
OPTIONAL = {"accelerate", "flax", "jax", "keras", "lightning", "optax", "orbax", "safetensors",
            "tensorflow", "torch", "transformers"}


def code_of(page: Path) -> str:
    return "\n".join(BLOCK.findall(page.read_text(encoding="utf-8")))


def imported_packages(code: str) -> set[str]:
    """The top-level packages the code imports."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def missing_frameworks(code: str) -> list[str]:
    return sorted(name for name in imported_packages(code) & OPTIONAL
                  if importlib.util.find_spec(name) is None)


PAGES = sorted(str(page.relative_to(GUIDES)) for page in GUIDES.rglob("*.md"))


def test_the_guides_include_the_troubleshooting_pages() -> None:
    assert "troubleshooting.md" in PAGES
    assert sum(page.startswith("troubleshooting/") for page in PAGES) >= 8


def test_a_guide_needing_an_absent_framework_is_told_apart_from_a_broken_import(
        monkeypatch: pytest.MonkeyPatch) -> None:
    code = ("import json\nimport torch.nn as nn\nfrom flax import nnx\n"
            "import absent_framework.sub\nimport no_such_module\n")
    assert imported_packages(code) == {"json", "torch", "flax", "absent_framework",
                                       "no_such_module"}
    monkeypatch.setattr(sys.modules[__name__], "OPTIONAL", OPTIONAL | {"absent_framework"})
    # An optional framework that is not installed skips the page; a module that is
    # not optional is never a reason to skip: its import fails the run.
    assert "absent_framework" in missing_frameworks(code)
    assert "no_such_module" not in missing_frameworks(code)


@pytest.mark.parametrize("page", PAGES)
def test_the_guide_runs(page: str, tmp_path: Path) -> None:
    code = code_of(GUIDES / page)
    assert code, f"{page} has no python example"
    missing = missing_frameworks(code)
    if missing:
        pytest.skip(f"{page} needs {', '.join(missing)}, which this environment lacks")
    script = tmp_path / "guide.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
