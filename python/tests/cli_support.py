"""What the command-line tests share: running the ``ocf`` console script, one set of
tensors written in every format OCF reads (each by its own writer: the safetensors
package, NumPy, TensorFlow), and validating ``--json`` output against the schemas."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import ocf

SCHEMAS = Path(ocf.__file__).parent / "cli" / "schemas"


def ocf_command() -> list[str]:
    script = shutil.which("ocf", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "ocf"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ocf_command(), *args], capture_output=True, text=True,
                          check=False, env=env)


def run_json(command: str, *args: str, status: int = 0) -> Any:
    """``ocf COMMAND ARGS --json``, checked against COMMAND's schema; the document."""
    done = run(command, *args, "--json")
    assert done.returncode == status, done.stderr
    document = json.loads(done.stdout)
    validator(command).validate(document)
    return document


def validator(command: str) -> Draft202012Validator:
    resources = []
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    registry: Registry = Registry().with_resources(resources)
    schema = json.loads((SCHEMAS / f"{command}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry)


def sample_tensors() -> dict[str, np.ndarray]:
    """Tensors every format holds: floats with NaN, Inf and zeros, integers, a scalar."""
    rng = np.random.default_rng(7)
    weights = rng.standard_normal((40, 30)).astype(np.float32)
    weights[0, :3] = [np.nan, np.inf, -np.inf]
    weights[1, :5] = 0
    return {"dense/kernel": weights,
            "dense/bias": np.linspace(-1, 1, 30, dtype=np.float64),
            "embedding": rng.integers(-1000, 1000, size=(50, 8), dtype=np.int32),
            "step": np.array(42, np.int64)}


@dataclass
class Written:
    """The sample tensors in each format: name -> path (for a TF prefix, the prefix)."""

    tensors: dict[str, np.ndarray]
    paths: dict[str, Path]


def write_every_format(where: Path) -> Written:
    """The sample tensors as an OCF file, an OCF directory, a managed directory, a
    safetensors file (the safetensors package) and an npz archive (NumPy)."""
    from safetensors.numpy import save_file

    tensors = sample_tensors()
    paths = {"ocf-file": where / "model.ocf", "ocf-directory": where / "model_dir",
             "managed": where / "run", "safetensors": where / "model.safetensors",
             "npz": where / "model.npz"}
    ocf.save_file(tensors, paths["ocf-file"])
    ocf.save_file(tensors, paths["ocf-directory"], layout="directory", compression="zstd")
    manager = ocf.CheckpointManager(ocf.Checkpoint(**{
        k.replace("/", "_"): ocf.Variable(v.copy()) for k, v in tensors.items()}),
        paths["managed"], max_to_keep=2)
    manager.save()
    manager.close()
    save_file(tensors, str(paths["safetensors"]))
    np.savez(paths["npz"], **tensors)
    return Written(tensors, paths)
