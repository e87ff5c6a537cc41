"""Every error the public API raises on bad input or a misuse is an ``ocf.OCFError``
that names the file: a walk over the API's error paths, one case each.

Each case builds what it needs in a fresh directory, calls one public
function the way a user would get it wrong, and the test checks the class
(an OCFError subclass, and the builtin a caller would catch), that the
error's ``path`` is the file involved, and that the message shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("jax")

import jax.numpy as jnp
import numpy as np
import torch

import ocf
import ocf.jax
import ocf.numpy
import ocf.torch
from ocf.objects.state_file import read_state


@dataclass(frozen=True)
class Case:
    name: str
    error: type[ocf.OCFError]
    builtin: type[Exception]
    file: str  # the name of the file the error must name
    call: Callable[[Path], object]  # makes the files it needs in a directory, then fails


def flat(directory: Path) -> Path:
    path = directory / "flat.ocf"
    ocf.save_file({"w": np.arange(4, dtype=np.float32)}, path)
    return path


def objects(directory: Path) -> Path:
    return Path(ocf.numpy.save({"w": np.arange(4.0)}, directory / "objects.ocf"))


def truncated(directory: Path) -> None:
    path = flat(directory)
    path.write_bytes(path.read_bytes()[:100])
    ocf.open(path)


def corrupted(directory: Path) -> None:
    path = flat(directory)
    with ocf.open(path) as reader:
        offset = reader["w"].blocks[0].offset
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.write_bytes(bytes(data))
    ocf.load_file(path)


def torch_shape(directory: Path) -> None:
    path = ocf.torch.save({"w": torch.zeros(3)}, directory / "t.ocf")
    ocf.torch.restore({"w": torch.zeros(4)}, path)


def state_file(text: str) -> Callable[[Path], Path]:
    def write(directory: Path) -> Path:
        (directory / "checkpoint.json").write_text(text)
        return directory
    return write


CASES = [
    Case("open a missing path", ocf.NotFoundError, FileNotFoundError, "nothing.ocf",
         lambda d: ocf.open(d / "nothing.ocf")),
    Case("open a truncated file", ocf.MalformedError, ValueError, "flat.ocf", truncated),
    Case("load a corrupted tensor", ocf.IntegrityError, ValueError, "flat.ocf", corrupted),
    Case("load a missing key", ocf.NotFoundError, KeyError, "flat.ocf",
         lambda d: ocf.numpy.load_file(flat(d), ["v"])),
    Case("load with a dtype that is none", ocf.InvalidError, ValueError, "flat.ocf",
         lambda d: ocf.numpy.load_file(flat(d), dtype="nonsense")),
    Case("torch: load a missing key", ocf.NotFoundError, KeyError, "flat.ocf",
         lambda d: ocf.torch.load_file(flat(d), ["v"])),
    Case("torch: load_model on an object checkpoint", ocf.NotFoundError, KeyError,
         "objects.ocf", lambda d: ocf.torch.load_model(torch.nn.Linear(2, 2), objects(d))),
    Case("torch: restore a shape that differs", ocf.InvalidError, ValueError, "t.ocf",
         torch_shape),
    Case("restore into a target with a leftover", ocf.RestoreMismatchError, AssertionError,
         "objects.ocf",
         lambda d: ocf.numpy.restore({"w": np.zeros(4), "x": np.zeros(1)}, objects(d))),
    Case("restore a dtype that differs", ocf.InvalidError, ValueError, "objects.ocf",
         lambda d: ocf.restore({"w": np.zeros(4, np.float32)}, objects(d))),
    Case("jax: restore a shape that differs", ocf.InvalidError, ValueError, "objects.ocf",
         lambda d: ocf.jax.restore({"w": jnp.zeros(5)}, objects(d))),
    Case("Saver: restore a shape that differs", ocf.InvalidError, ValueError, "flat.ocf",
         lambda d: ocf.Saver({"w": np.zeros(5, np.float32)}).restore(flat(d))),
    Case("a state file that is not JSON", ocf.MalformedError, ValueError, "checkpoint.json",
         lambda d: read_state(state_file("{")(d))),
    Case("a state file of another format", ocf.InvalidError, ValueError, "checkpoint.json",
         lambda d: read_state(state_file('{"format": "x"}')(d))),
    Case("list the variables of a missing checkpoint", ocf.NotFoundError, FileNotFoundError,
         "none", lambda d: ocf.list_variables(d / "none")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_error_path_raises_an_ocf_error_naming_the_file(case: Case,
                                                            tmp_path: Path) -> None:
    with pytest.raises(ocf.OCFError) as caught:
        case.call(tmp_path)
    error = caught.value
    assert isinstance(error, case.error)
    assert isinstance(error, case.builtin)
    assert error.path is not None
    assert Path(error.path).name == case.file
    assert str(error).startswith(f"{error.label}: {error.path}: ")
