"""How long `import ocf` takes, against the floor (`import numpy`) and a peer (safetensors).

Each import runs in a fresh interpreter; the best of --repeat runs counts, so
that a loaded machine slows every row alike. Run from the repository root:

    .venv/bin/python python/benchmarks/bench_import.py --repeat 7
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

IMPORTS = {"numpy (floor)": "import numpy", "ocf": "import ocf",
           "safetensors.numpy": "import safetensors.numpy", "ocf.torch": "import ocf.torch"}


def best_time(statement: str, repeat: int) -> float:
    """Seconds for one fresh interpreter to run ``statement``, minus an empty one's."""
    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start
    empty = min(run("pass") for _ in range(repeat))
    return min(run(statement) for _ in range(repeat)) - empty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    times = {name: best_time(code, repeat) for name, code in IMPORTS.items()}
    floor, peer = times["numpy (floor)"], times["safetensors.numpy"]
    print(f"{'import':<20}{'seconds':>10}{'x numpy':>10}{'x safetensors':>15}")
    for name, seconds in times.items():
        print(f"{name:<20}{seconds:>10.3f}{seconds / floor:>10.2f}{seconds / peer:>15.2f}")


if __name__ == "__main__":
    main()
