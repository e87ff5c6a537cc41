#!/usr/bin/env bash
# Create or refresh the virtualenv at .venv and install OCF into it (editable).
#   setup.sh          the package with its development, benchmark, docs and
#                     framework dependencies: what scripts/test.sh needs
#   setup.sh --core   the package and its own dependencies only (NumPy,
#                     protobuf, zstandard, crc32c, ml-dtypes): what scripts/demo.sh needs
# Both install into the same .venv, so the test set-up after the demo's adds
# the rest. A set-up already done for this pyproject.toml is skipped (delete
# .venv/.ocf-setup to redo it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
core="$root/python"
case "${1:-}" in
  --core) wanted="$core" ;;
  "") wanted="$core[dev,bench,docs,frameworks]" ;;
  *) echo "usage: setup.sh [--core]" >&2; exit 2 ;;
esac
"$python" - <<'PY'
import sys
if sys.version_info < (3, 10):
    sys.exit(f"OCF needs Python >= 3.10, found {sys.version.split()[0]}")
PY
if [ ! -x "$root/.venv/bin/python" ]; then
  "$python" -m venv "$root/.venv"
fi
# One line per set-up done: what was installed, from which pyproject.toml.
stamp() {
  echo "$1 $("$root/.venv/bin/python" -c 'import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$root/python/pyproject.toml")"
}
done_file="$root/.venv/.ocf-setup"
if grep -qxF "$(stamp "$wanted")" "$done_file" 2>/dev/null; then
  exit 0
fi
pip=("$root/.venv/bin/python" -m pip --disable-pip-version-check)
if [ "$wanted" != "$core" ]; then
  # The venv's own pip installs the core package; the frameworks get the newest.
  "${pip[@]}" install --quiet --upgrade pip
fi
"${pip[@]}" install --quiet -e "$wanted"
stamp "$wanted" >> "$done_file"
[ "$wanted" = "$core" ] || stamp "$core" >> "$done_file"  # the full set-up includes the core one
