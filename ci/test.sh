#!/usr/bin/env bash
# The test command: installs the Debian packages, then builds and runs the whole suite with ctest,
# once in Release (every Highway target) and once in Debug with -fsanitize=address,undefined.
# Any failing test or sanitizer report fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${JOBS:-$(nproc)}"  # parallel build and test jobs

bash ci/install-deps.sh

for preset in release asan; do
  echo "== ${preset}: configure and build"
  cmake --preset "${preset}" > /dev/null
  cmake --build --preset "${preset}" -j "${jobs}"
  echo "== ${preset}: ctest"
  ctest --preset "${preset}" -j "${jobs}"
done
echo "== all tests passed (release and asan)"
