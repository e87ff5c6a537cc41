"""The built API reference: ``mkdocs build --strict`` passes, every public module has a
page, and no Sphinx role is left as literal text (python/tools/docs_roles.py turns
them into links)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPOSITORY

PAGES = {"ocf": "api/ocf", "ocf.numpy": "api/numpy", "ocf.torch": "api/torch",
         "ocf.jax": "api/jax", "ocf.tensorflow": "api/tensorflow", "ocf.keras": "api/keras",
         "ocf.distributed.torch": "api/distributed", "ocf.distributed.dcp": "api/dcp",
         "ocf.distributed.jax": "api/distributed_jax", "ocf.keras.callbacks": "api/keras_callbacks",
         "ocf.lightning": "api/lightning", "ocf.huggingface": "api/huggingface",
         "ocf.testing": "api/testing"}
LITERAL_ROLE = re.compile(r":(?:func|meth|class|mod|data|attr|exc):(?:<code>|`)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                          cwd=REPOSITORY, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("module", sorted(PAGES))
def test_every_public_module_has_a_page(site: Path, module: str) -> None:
    page = (site / PAGES[module] / "index.html").read_text(encoding="utf-8")
    assert f'id="{module}' in page


def test_no_sphinx_role_is_left_as_literal_text(site: Path) -> None:
    literal = {str(page.relative_to(site)): LITERAL_ROLE.findall(text)
               for page in site.rglob("*.html")
               if LITERAL_ROLE.search(text := page.read_text(encoding="utf-8"))}
    assert literal == {}
    torch_page = (site / "api/torch/index.html").read_text(encoding="utf-8")
    assert re.search(r'<a class="autorefs[^"]*"[^>]*href="[^"]*#ocf\.numpy\.save"', torch_page)
