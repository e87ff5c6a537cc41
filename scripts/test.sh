#!/usr/bin/env bash
# The whole test suite, set-up included: generated code, schema lint,
# static checks, the API reference, then pytest. Exits non-zero on any
# failure, and when pytest collects no test at all.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
py="$root/.venv/bin/python"
cd "$root"
echo "== generated protobuf code is current"
"$py" python/tools/gen_proto.py --check
echo "== proto lint"
"$py" python/tools/lint_proto.py
echo "== ruff"
"$py" -m ruff check python conformance spec/examples
echo "== mypy (strict)"
(cd python && "$py" -m mypy)
echo "== import contracts (the layers import only downward)"
(cd python && "$root/.venv/bin/lint-imports" --no-cache)
echo "== API reference (mkdocs.yml, docs/): built with --strict, a warning fails it"
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
# Not --quiet: it hides the warnings that --strict counts, and the build then passes.
"$py" -m mkdocs build --strict --config-file "$root/mkdocs.yml" --site-dir "$site"
echo "== pytest (the packaging test builds the wheel and sdist, and runs the wheel in a new venv)"
status=0
"$py" -m pytest python/tests --durations=25 "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
