#!/usr/bin/env bash
# The main job end to end, set-up included: save a training state by name,
# look inside with the CLI, verify it, catch a corrupted copy, restore.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
exec "$root/.venv/bin/python" "$root/python/examples/demo.py" "$@"
