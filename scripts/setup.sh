#!/usr/bin/env bash
# Create or refresh the virtualenv at .venv and install OCF with its
# development and benchmark dependencies. Sourced by the other scripts.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
"$python" - <<'PY'
import sys
if sys.version_info < (3, 10):
    sys.exit(f"OCF needs Python >= 3.10, found {sys.version.split()[0]}")
PY
if [ ! -x "$root/.venv/bin/python" ]; then
  "$python" -m venv "$root/.venv"
fi
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root/python[dev,bench,frameworks]"
