#!/usr/bin/env bash
# Runs every test: installs dependencies (idempotent), builds a release build in build/, runs
# `meson test`. Tests that need root or network namespaces skip (exit 77) where unavailable.
# Usage: tools/test.sh [extra meson test args, e.g. --suite unit]
set -euo pipefail
cd "$(dirname "$0")/.."

./tools/install-deps.sh
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release --prefix=/usr
else
  meson setup --reconfigure build >/dev/null
fi
ninja -C build
meson test -C build --print-errorlogs --num-processes 1 "$@"
