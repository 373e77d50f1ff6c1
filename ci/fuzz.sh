#!/usr/bin/env bash
# Builds the fuzz preset (clang-14, libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer)
# and runs each target of tools/fuzz for SECONDS (default 600) one after the other, starting from
# the embedded fixtures (files up to 64 KiB) and the hand-made malformed files of tools/fuzz/seeds.
# The corpus grows in out/fuzz/<target>/ across runs (`--fresh`: a temporary corpus, as ci/test.sh
# uses); a crash, hang (10 s per input), leak or sanitizer report stops the run, leaves the input in
# out/fuzz/artifacts/ and fails the script.
#
#   ci/fuzz.sh [--fresh] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
fresh=0
if [ "${1:-}" = "--fresh" ]; then
  fresh=1
  shift
fi
seconds=${1:-600}

cmake --preset fuzz > /dev/null
cmake --build --preset fuzz -j "$(nproc)"

seeds=build/fuzz/seeds
rm -rf "${seeds}"
mkdir -p "${seeds}" out/fuzz/artifacts
cp tools/fuzz/seeds/*.safetensors "${seeds}/"
find fixtures -name '*.safetensors' -size -64k | while read -r f; do
  cp "$f" "${seeds}/$(echo "${f#fixtures/}" | tr / _)"
done

for target in fuzz_safetensors fuzz_fixture fuzz_verify; do
  if [ "${fresh}" = 1 ]; then
    corpus=$(mktemp -d)
  else
    corpus=out/fuzz/${target}
    mkdir -p "${corpus}"
  fi
  echo "== ${target}: ${seconds} s"
  status=0
  build/fuzz/tools/fuzz/${target} -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -dict=tools/fuzz/fixtures.dict -print_final_stats=1 \
    -artifact_prefix=out/fuzz/artifacts/${target}- \
    "${corpus}" "${seeds}" > "build/fuzz/${target}.log" 2>&1 || status=$?
  if [ "${fresh}" = 1 ]; then rm -rf "${corpus}"; fi
  grep -E "^stat::(number_of_executed_units|new_units_added|peak_rss_mb)" "build/fuzz/${target}.log" || true
  if [ "${status}" != 0 ]; then
    tail -n 60 "build/fuzz/${target}.log"
    echo "== ${target} failed (exit ${status}); input in out/fuzz/artifacts/"
    exit 1
  fi
done
echo "== fuzzing found nothing (${seconds} s per target)"
