#!/usr/bin/env bash
# Builds the C++, Java and TypeScript decoders of bindings/ from proto/ and
# checks that each of them, and the Python one, prints for
# spec/examples/minimal.ocf exactly what appendix_a.expected says that file
# holds (spec/format.md, Appendix A). Exits 1 naming the first binding that
# differs. Usage: bash bindings/check.sh [PYTHON]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python="${1:-python3}"
out="$root/native/build/bindings"
example="$root/spec/examples/minimal.ocf"

make --no-print-directory -s -j"$(nproc)" -C "$here"
expected="$(grep -v '^#' "$here/appendix_a.expected")"
status=0
check() {  # check NAME COMMAND...
  local name="$1"
  shift
  local actual
  if ! actual="$("$@")"; then
    echo "bindings: $name: the decoder failed" >&2
    status=1
  elif [ "$actual" != "$expected" ]; then
    echo "bindings: $name prints something else than appendix_a.expected:" >&2
    diff <(printf '%s\n' "$expected") <(printf '%s\n' "$actual") >&2 || true
    status=1
  else
    echo "bindings: $name decodes Appendix A as the spec says"
  fi
}
check C++ "$out/cpp/decode_appendix_a" "$example"
check Java java -cp "$out/java/classes:/usr/share/java/protobuf.jar" DecodeAppendixA "$example"
check TypeScript node "$out/ts/out/decode_appendix_a.js" "$example"
check Python env PYTHONPATH="$root/python/src${PYTHONPATH:+:$PYTHONPATH}" "$python" "$here/python/decode_appendix_a.py" "$example"
exit "$status"
