"""Every entry point reads every format, in a fresh process, whatever was imported first.

Each process imports one public module first (``ocf``, ``ocf.numpy``,
``ocf.torch``, ``ocf.jax``, ``ocf.keras``, or runs the ``ocf`` command) and
then reads one checkpoint through every entry point of that module (the
frameworks' ``load_file`` only ``emb``: TensorFlow's file also holds byte
strings, which they have no tensors for). Before
the registry (ocf.interop.registry) loaded the formats itself, ``import
ocf.torch; ocf.torch.load_file("a.npz")`` raised MalformedError ("not an OCF
file"), because the foreign formats registered only when an ``ocf.X``
attribute was touched.

The files are written by each format's own writer: OCF by ocf.save_file, a
safetensors file by the safetensors package, an npz archive by NumPy, a GGUF
file by the gguf package, a sharded safetensors model by huggingface_hub, an
Orbax checkpoint by orbax-checkpoint, a TensorFlow checkpoint by real TensorFlow
(tf.compat.v1.train.Saver, the ``v1_partitioned`` checkpoint of tf_support.py,
whose ``emb``, stored in three slices, and ``dense/kernel`` are the arrays below),
a ``.pt`` file by torch.save and a DCP directory by torch.distributed.checkpoint.save,
in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("jax")
pytest.importorskip("keras")
pytest.importorskip("safetensors")
pytest.importorskip("gguf")
pytest.importorskip("huggingface_hub")
pytest.importorskip("orbax.checkpoint")

import numpy as np
from foreign_files import nested, write_orbax, write_sharded, write_with_gguf

import ocf

# The values tf_support.tf_v1_partitioned gives TensorFlow; the other writers get the same.
EMB = np.arange(40, dtype=np.float32).reshape(10, 4)
KERNEL = np.eye(3, dtype=np.float64)
FORMATS = ("ocf", "safetensors", "npz", "tensorflow", "gguf", "sharded-safetensors", "orbax",
           "pytorch", "dcp")

# Run in the child after the entry point's own import: reports each array it read.
_REPORT = """
import json as _json, sys as _sys
import numpy as _np
PATH = _sys.argv[1]
_read = {}
def got(name, value):
    _read[name] = _np.asarray(value).tolist()
"""

# Each module's entry points; the first line is the process's first import of ocf.
ENTRY_POINTS = {
    "ocf": """
        import ocf
        tensors = ocf.load_file(PATH)
        got("ocf.load_file", tensors["emb"])
        with ocf.open(PATH) as opened:
            assert isinstance(opened, ocf.Source), type(opened)
            view = opened["emb"]
            assert (view.key, view.dtype.name, view.shape) == ("emb", "float32", (10, 4))
            assert opened.summary("dense/kernel").dtype.numpy == _np.float64
            got("ocf.open", opened.get_tensor("emb"))
            got("ocf.open get_slice", opened.get_slice("emb", (slice(2, 9, 3), 1)))
        got("ocf.load_variable", ocf.load_variable(PATH, "dense/kernel"))
        assert ("dense/kernel", "float64", (3, 3)) in ocf.list_variables(PATH)
        state = {"emb": _np.zeros((10, 4), _np.float32)}
        ocf.restore(state, PATH, partial=True, name_map=lambda n: n.removesuffix("/.value"))
        got("ocf.restore", state["emb"])
    """,
    "ocf.numpy": """
        from ocf.numpy import load_file
        got("ocf.numpy.load_file", load_file(PATH)["emb"])
        import ocf.numpy
        with ocf.numpy.open(PATH) as opened:
            got("ocf.numpy.open", opened.read_tensor("dense/kernel"))
        state = {"emb": _np.zeros((10, 4), _np.float32)}
        ocf.numpy.restore(state, PATH, partial=True,
                          name_map=lambda n: n.removesuffix("/.value"))
        got("ocf.numpy.restore", state["emb"])
    """,
    "ocf.torch": """
        import ocf.torch
        import torch
        got("ocf.torch.load_file", ocf.torch.load_file(PATH, ["emb"])["emb"].numpy())
        def model():
            module = torch.nn.Module()  # "/" is allowed in a parameter's name, "." is not
            module.register_parameter("emb", torch.nn.Parameter(torch.zeros(10, 4)))
            module.register_parameter("dense/kernel", torch.nn.Parameter(
                torch.zeros(3, 3, dtype=torch.float64)))
            return module
        loaded = model()
        ocf.torch.load_model(loaded, PATH, strict=False)
        got("ocf.torch.load_model", loaded.state_dict()["dense/kernel"].numpy())
        restored = model()
        ocf.torch.restore(restored, PATH, partial=True,
                          name_map=lambda n: n.replace("%2F", "/").removesuffix("/.value"))
        got("ocf.torch.restore", restored.state_dict()["emb"].detach().numpy())
    """,
    "ocf.jax": """
        import ocf.jax
        got("ocf.jax.load_file", ocf.jax.load_file(PATH, ["emb"])["emb"])
    """,
    "ocf.keras": """
        import ocf.keras
        got("ocf.keras.load_file", _np.asarray(ocf.keras.load_file(PATH, ["emb"])["emb"]))
    """,
}
EXPECTED = {
    "ocf": {"ocf.load_file": EMB, "ocf.open": EMB, "ocf.open get_slice": EMB[2:9:3, 1],
            "ocf.load_variable": KERNEL, "ocf.restore": EMB},
    "ocf.numpy": {"ocf.numpy.load_file": EMB, "ocf.numpy.open": KERNEL,
                  "ocf.numpy.restore": EMB},
    "ocf.torch": {"ocf.torch.load_file": EMB, "ocf.torch.load_model": KERNEL,
                  "ocf.torch.restore": EMB},
    "ocf.jax": {"ocf.jax.load_file": EMB},
    "ocf.keras": {"ocf.keras.load_file": EMB},
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, tf_generated: Path
                ) -> dict[str, Path]:
    from safetensors.numpy import save_file

    where = tmp_path_factory.mktemp("entry_points")
    tensors = {"emb": EMB, "dense/kernel": KERNEL}
    ocf.save_file(tensors, where / "model.ocf")
    save_file(tensors, str(where / "model.safetensors"))
    np.savez(where / "model.npz", **tensors)
    write_with_gguf(where / "model.gguf", tensors)
    write_sharded(where / "sharded", tensors, max_shard_size=100)
    write_orbax(where / "orbax", nested(tensors))
    import torch
    import torch.distributed.checkpoint as dcp

    state = {key: torch.from_numpy(value.copy()) for key, value in tensors.items()}
    torch.save(state, where / "model.pt")
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(where / "dcp")), no_dist=True)
    return {"ocf": where / "model.ocf", "safetensors": where / "model.safetensors",
            "npz": where / "model.npz", "gguf": where / "model.gguf",
            "sharded-safetensors": where / "sharded", "orbax": where / "orbax",
            "tensorflow": tf_generated / "v1_partitioned" / "model.ckpt-5",
            "pytorch": where / "model.pt", "dcp": where / "dcp"}


def _child(code: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, check=False, timeout=600)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("module", list(ENTRY_POINTS))
def test_every_entry_point_of_a_module_imported_first_reads_the_format(
        checkpoints: dict[str, Path], module: str, fmt: str) -> None:
    body = textwrap.dedent(ENTRY_POINTS[module])
    code = _REPORT + body + "\nprint(_json.dumps(_read))\n"
    done = _child(code, checkpoints[fmt])
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert read.keys() == EXPECTED[module].keys()
    for name, expected in EXPECTED[module].items():
        np.testing.assert_array_equal(np.array(read[name], expected.dtype), expected,
                                      err_msg=name)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_command_line_inspects_and_verifies_the_format(checkpoints: dict[str, Path],
                                                          fmt: str) -> None:
    path = str(checkpoints[fmt])
    inspected = subprocess.run([sys.executable, "-m", "ocf", "inspect", "--all", "--json", path],
                               capture_output=True, text=True, check=False, timeout=600)
    assert inspected.returncode == 0, inspected.stderr
    tensors = {t["key"]: t for t in json.loads(inspected.stdout)["tensors"]}
    assert (tensors["emb"]["dtype"], tensors["emb"]["shape"]) == ("float32", [10, 4])
    np.testing.assert_array_equal(np.array(tensors["emb"]["value"], np.float32), EMB)
    verified = subprocess.run([sys.executable, "-m", "ocf", "verify", "--json", path],
                              capture_output=True, text=True, check=False, timeout=600)
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["ok"] is True
