#!/usr/bin/env bash
# Install what the native steps of the test command need, and nothing when
# it is all there (a second run takes about a second):
#   - from apt: protoc, the protobuf C++ library and headers, libzstd, the
#     protobuf Java jar, a JDK (only when javac is missing), g++ and make,
#     node and npm (only when missing), strace (the crash tests that kill a
#     writer between two system calls follow it), Chromium and its driver
#     (the test of `ocf report` opens the page in headless Chromium);
#   - from npm: buf and protoc-gen-es with its runtime, at the versions
#     pinned by native/package-lock.json, into native/node_modules (ignored
#     by git).
# Used by scripts/test.sh; safe to run on its own.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

missing=()
need_package() {  # need_package DEBIAN_PACKAGE: add it unless installed
  if ! dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$1")
  fi
}
need_command() {  # need_command COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null 2>&1 || missing+=("$2")
}
need_package protobuf-compiler
need_package libprotobuf-dev
need_package libzstd-dev
need_package libprotobuf-java
need_command javac default-jdk-headless
need_command g++ g++
need_command make make
need_command node nodejs
need_command npm npm
need_command strace strace
need_command chromium chromium
need_command chromedriver chromium-driver

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup_native: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm ci only when the lock file changed since the last install.
lock="$root/native/package-lock.json"
stamp="$root/native/node_modules/.ocf-lock-sha256"
want="$(sha256sum "$lock" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || [ ! -x "$root/native/node_modules/.bin/buf" ]; then
  echo "setup_native: npm ci in native/"
  (cd "$root/native" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi

for tool in protoc javac java g++ node strace "$root/native/node_modules/.bin/buf" "$root/native/node_modules/.bin/protoc-gen-es"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup_native: $tool is still missing" >&2; exit 1; }
done
test -f /usr/share/java/protobuf.jar || { echo "setup_native: /usr/share/java/protobuf.jar is missing" >&2; exit 1; }
