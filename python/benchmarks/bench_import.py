"""How long `import ocf` takes, against the floor (`import numpy`) and a peer (safetensors).

Each import runs in a fresh interpreter; the best of --repeat runs counts, so
that a loaded machine slows every row alike. `import ocf` loads nothing but
its version (the public names load on first use); the rows after it show what
the first use, `ocf --version` and a framework adapter cost. Target: `import
ocf` and `ocf --version` under 0.3 s. Run from the repository root:

    .venv/bin/python python/benchmarks/bench_import.py --repeat 7
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

IMPORTS = {"numpy (floor)": ["-c", "import numpy"], "ocf": ["-c", "import ocf"],
           "ocf --version": ["-m", "ocf", "--version"],
           "ocf first use": ["-c", "import ocf; ocf.save_file"],
           "safetensors.numpy": ["-c", "import safetensors.numpy"],
           "ocf.torch": ["-c", "import ocf.torch"]}


def best_time(arguments: list[str], repeat: int) -> float:
    """Seconds for one fresh interpreter run with ``arguments``, minus an empty one's."""
    def run(arguments: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, *arguments], check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start
    empty = min(run(["-c", "pass"]) for _ in range(repeat))
    return min(run(arguments) for _ in range(repeat)) - empty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    times = {name: best_time(arguments, repeat) for name, arguments in IMPORTS.items()}
    floor, peer = times["numpy (floor)"], times["safetensors.numpy"]
    print(f"{'import':<20}{'seconds':>10}{'x numpy':>10}{'x safetensors':>15}")
    for name, seconds in times.items():
        print(f"{name:<20}{seconds:>10.3f}{seconds / floor:>10.2f}{seconds / peer:>15.2f}")


if __name__ == "__main__":
    main()
