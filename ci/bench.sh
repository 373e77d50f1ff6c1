#!/usr/bin/env bash
# The bench command: builds Release and runs every benchmark with Google Benchmark's JSON output
# (repetitions, medians), one progress line per benchmark, into out/bench/<date>-<commit>.json,
# stamped with the CPU model, the ISA features found, the thread count, the compiler and the commit;
# then renders out/bench/dashboard.html from every result file there (oldest first), with the
# verdicts against the newest committed baseline of bench/baselines/ of this machine kind (CPU
# model and ISA), else the newest.
# Usage: ci/bench.sh [REPETITIONS] [Google Benchmark flags, e.g. --benchmark_filter=topk]
# The repetition count (default 5; also the REPETITIONS variable) may be left out; JOBS sets the
# build's parallel jobs (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${REPETITIONS:-5}"
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then
  reps="$1"
  shift
fi
jobs="${JOBS:-$(nproc)}"

bash ci/install-deps.sh > /dev/null
cmake --preset bench > /dev/null
cmake --build --preset bench -j "${jobs}" --target dsv4cpu-bench > /dev/null

flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
isa=""
for f in avx2 avx512f avx512bw avx512vl avx512vbmi avx512_bf16 amx_tile amx_bf16; do
  case " ${flags} " in *" ${f} "*) isa="${isa:+${isa}+}${f}" ;; esac
done
model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain 2>/dev/null | grep -q . && echo "-dirty" || true)
compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' build/bench/CMakeCache.txt)
compiler="$(basename "${compiler}") $("${compiler}" -dumpfullversion)"
threads="${OMP_NUM_THREADS:-$(nproc)}"

mkdir -p out/bench
out="out/bench/$(date -u +%Y%m%dT%H%M%SZ)-${commit:0:8}${dirty}.json"
# Repetitions interleaved in random order: a neighbour's burst then lands on one repetition of
# several benchmarks instead of every repetition of one, which the noise test can tell apart.
build/bench/bench/dsv4cpu-bench \
  --benchmark_repetitions="${reps}" --benchmark_enable_random_interleaving=true \
  --benchmark_out="${out}" --benchmark_out_format=json \
  --benchmark_context="cpu_model=${model//,/ },isa=${isa},threads=${threads},compiler=${compiler},commit=${commit}${dirty}" \
  "$@"
if [[ ! -s "${out}" ]]; then  # e.g. a filter that matches no benchmark
  rm -f "${out}"
  echo "no benchmark ran; nothing written" >&2
  exit 1
fi
python3 tools/bench/dsv4cpu-dashboard $(ls out/bench/*.json | sort) --baseline bench/baselines \
  -o out/bench/dashboard.html
echo "results: ${out}"
