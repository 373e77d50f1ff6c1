#!/usr/bin/env bash
# The test command: installs the Debian packages, then builds and runs the whole suite with ctest,
# once in Release (every Highway target), followed by `pip install .` into a virtual environment
# with PyPI's torch and the package's tests there (ci/pip-install.sh), and once in Debug with
# -fsanitize=address,undefined; then
# the concurrency test under ThreadSanitizer (clang) and each libFuzzer target for 30 s from the
# embedded fixtures (ci/fuzz.sh). Any failing test, sanitizer report or fuzzer finding fails the
# script.
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
  if [ "${preset}" = release ]; then
    echo "== pip install . (torch from PyPI) and the package's tests"
    bash ci/pip-install.sh
  fi
done
echo "== tsan: configure and build the concurrency test"
cmake --preset tsan > /dev/null
cmake --build --preset tsan -j "${jobs}"
echo "== tsan: ctest"
ctest --preset tsan
echo "== fuzz: 30 s per target"
ci/fuzz.sh --fresh 30
echo "== all tests passed (release, pip install, asan, tsan, fuzz)"
