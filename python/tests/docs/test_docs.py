"""The documentation: every public name of the API reference has a docstring with
an example, and the command line's page covers every command.

The reference itself (mkdocs.yml, docs/) is built by scripts/test.sh with
``mkdocs build --strict``. The docstrings are read as the reference reads them,
by griffe (mkdocstrings' loader), without importing any framework.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import griffe
import pytest
from repo_paths import REPOSITORY

SOURCE = REPOSITORY / "python" / "src"
# The modules of the API reference whose __all__ is public API.
PUBLIC_MODULES = ("ocf", "ocf.numpy", "ocf.torch", "ocf.jax", "ocf.tensorflow", "ocf.keras",
                  "ocf.distributed.parts", "ocf.distributed.torch", "ocf.distributed.dcp",
                  "ocf.distributed.jax", "ocf.keras.callbacks", "ocf.lightning",
                  "ocf.huggingface", "ocf.testing")


def public_objects() -> Iterator[tuple[str, griffe.Object]]:
    package = griffe.load("ocf", search_paths=[SOURCE], resolve_aliases=True,
                          docstring_parser="google")
    for module_path in PUBLIC_MODULES:
        module = package if module_path == "ocf" else package[module_path.removeprefix("ocf.")]
        exported = module.exports
        assert exported, f"{module_path} has no __all__"
        for name in exported:
            member = module[str(name)]
            yield f"{module_path}.{name}", member.final_target if member.is_alias else member


PUBLIC = dict(public_objects())


def examples_of(target: griffe.Object) -> list[str]:
    """The code of the docstring's Examples section (>>> lines, prompts removed)."""
    assert target.docstring is not None
    code = []
    for section in target.docstring.parsed:
        if section.kind is griffe.DocstringSectionKind.examples:
            code += [text for kind, text in section.value if kind.value == "examples"]
    return [re.sub(r"^(>>> |\.\.\. ?)", "", line, flags=re.M) for line in code]


def test_the_public_api_is_what_the_reference_lists() -> None:
    for name in ("ocf.save_file", "ocf.Checkpoint", "ocf.torch.save", "ocf.jax.TORCH_TO_FLAX",
                 "ocf.tensorflow.BundleReader", "ocf.distributed.torch.load"):
        assert name in PUBLIC
    assert len(PUBLIC) > 60


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_name_has_a_docstring_with_an_example_that_compiles(name: str) -> None:
    target = PUBLIC[name]
    assert target.docstring is not None, f"{name} ({target.path}) has no docstring"
    assert target.docstring.value.strip(), f"{name} ({target.path}) has an empty docstring"
    examples = examples_of(target)
    assert examples, f"{name} ({target.path}): no Examples section with >>> lines"
    for code in examples:
        compile(code, f"<example of {name}>", "exec")  # a SyntaxError fails the test


def test_the_command_line_page_covers_every_command() -> None:
    page = (REPOSITORY / "docs" / "cli.md").read_text()
    usage = subprocess.run([sys.executable, "-m", "ocf", "--help"], capture_output=True,
                           text=True, check=True).stdout
    commands = re.search(r"\{([a-z,]+)\}", usage)
    assert commands is not None, usage
    for command in commands.group(1).split(","):
        assert f"## `ocf {command}" in page, f"docs/cli.md does not describe ocf {command}"
