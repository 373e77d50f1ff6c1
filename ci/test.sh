#!/usr/bin/env bash
# The test command: installs the Debian packages, then builds and runs the whole suite with ctest,
# once in Release (every Highway target), followed by `pip install .` into a virtual environment
# with PyPI's torch and the package's tests there (ci/pip-install.sh), and once in Debug with
# -fsanitize=address,undefined; then
# the concurrency test under ThreadSanitizer (clang) and each libFuzzer target for 30 s from the
# embedded fixtures (ci/fuzz.sh). Any failing test, sanitizer report or fuzzer finding fails the
# script. Its last line but one gives each step's seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${JOBS:-$(nproc)}"  # parallel build and test jobs

times=""  # "step N s, ..." of the steps done
timed() {  # timed STEP COMMAND...: runs the command and adds its seconds to $times
  local step="$1" start=${SECONDS}
  shift
  "$@"
  times="${times:+${times}, }${step} $((SECONDS - start)) s"
}
build() {  # build PRESET
  cmake --preset "$1" > /dev/null
  cmake --build --preset "$1" -j "${jobs}"
}

timed deps bash ci/install-deps.sh

for preset in release asan; do
  echo "== ${preset}: configure and build"
  timed "${preset} build" build "${preset}"
  echo "== ${preset}: ctest"
  timed "${preset} ctest" ctest --preset "${preset}" -j "${jobs}"
  if [ "${preset}" = release ]; then
    echo "== pip install . (torch from PyPI) and the package's tests"
    timed "pip install" bash ci/pip-install.sh
  fi
done
echo "== tsan: configure and build the concurrency test"
timed "tsan build" build tsan
echo "== tsan: ctest"
timed "tsan ctest" ctest --preset tsan
echo "== fuzz: 30 s per target"
timed fuzz ci/fuzz.sh --fresh 30
echo "ci/test.sh: ${times}; total ${SECONDS} s"
echo "== all tests passed (release, pip install, asan, tsan, fuzz)"
