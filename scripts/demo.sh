#!/usr/bin/env bash
# The main job end to end, set-up included (the core package only): a
# training run saved after every step, killed with SIGKILL, resumed by
# structure in a fresh program with losses equal to an uninterrupted run's,
# then inspected, drawn and verified with the ocf command line, and a
# corrupted copy caught.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh" --core
exec "$root/.venv/bin/python" "$root/python/examples/demo.py" "$@"
