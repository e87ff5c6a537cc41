"""Rebuild the generated protobuf modules (python/src/ocf/**/v1/*_pb2.py[i]).

Each package of PACKAGES (proto/ocf/v1 and proto/ocf/tensorflow/v1) is
generated into the same path under python/src.

Run from anywhere:  python python/tools/gen_proto.py
With --check it regenerates into a temporary directory and exits 1 if the
committed modules differ from what the .proto files produce (CI uses this).
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]
PROTO_ROOT = ROOT / "proto"
PY_ROOT = ROOT / "python" / "src"
PACKAGES = (Path("ocf") / "v1", Path("ocf") / "tensorflow" / "v1")
# google/protobuf/*.proto (wrappers.proto is imported by the TensorFlow
# object graph); the generated code imports them from the protobuf runtime.
WELL_KNOWN_ROOT = Path(str(protoc.__file__)).with_name("_proto")


def proto_files() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((PROTO_ROOT / package).glob("*.proto"))]


def generate(out_dir: Path) -> None:
    for package in PACKAGES:
        (out_dir / package).mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{WELL_KNOWN_ROOT}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *(str(p) for p in proto_files()),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def generated_names(directory: Path) -> set[str]:
    return {p.name for p in directory.glob("*_pb2.py*")}


def stale_names(committed_dir: Path, fresh_dir: Path) -> list[str]:
    """Generated files missing from, extra in, or different between the two."""
    names = generated_names(committed_dir) | generated_names(fresh_dir)
    return sorted(
        str(committed_dir.relative_to(PY_ROOT) / n)
        for n in names
        if not (committed_dir / n).exists()
        or not (fresh_dir / n).exists()
        or not filecmp.cmp(committed_dir / n, fresh_dir / n, shallow=False)
    )


def check() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        stale = [n for package in PACKAGES for n in stale_names(PY_ROOT / package, fresh / package)]
    if stale:
        print("stale generated protobuf code: " + ", ".join(stale))
        print("run: python python/tools/gen_proto.py")
        return 1
    print("generated protobuf code is up to date")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if stale")
    if parser.parse_args().check:
        return check()
    generate(PY_ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
