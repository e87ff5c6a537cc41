#!/usr/bin/env bash
# The whole test suite, set-up included: generated code, the schemas
# (buf), static checks, the API reference, the bindings and the C++
# implementation, then pytest. Exits non-zero on any failure, and when
# pytest collects no test at all.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
echo "== native tools (protoc, libprotobuf, libzstd, JDK, node; buf, protoc-gen-es)"
bash "$root/scripts/setup_native.sh"
buf="$root/native/node_modules/.bin/buf"
py="$root/.venv/bin/python"
cd "$root"
echo "== generated protobuf code is current"
"$py" python/tools/gen_proto.py --check
echo "== buf lint (STANDARD, COMMENTS) and buf format"
"$buf" lint
"$buf" format --exit-code --diff
echo "== buf breaking against the last released schemas (proto/baseline/)"
"$buf" breaking --against proto/baseline/ocf-v1.binpb
echo "== ruff"
"$py" -m ruff check python conformance spec/examples bindings
echo "== mypy (strict)"
(cd python && "$py" -m mypy)
echo "== import contracts (the layers import only downward)"
(cd python && "$root/.venv/bin/lint-imports" --no-cache)
echo "== bindings: C++, Java, TypeScript and Python decode spec/format.md Appendix A"
bash bindings/check.sh "$py"
echo "== impl/cpp: build the C++ implementation, run the conformance suite on it"
make --no-print-directory -s -j"$(nproc)" -C impl/cpp
"$root/.venv/bin/ocf" conformance --impl impl/cpp/build/ocf-cpp-adapter
echo "== impl/cpp against the reference on 2,000 damaged copies of the read cases (same answers)"
"$py" conformance/tools/differential.py --impl impl/cpp/build/ocf-cpp-adapter --rounds 2000 --seed 7
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
