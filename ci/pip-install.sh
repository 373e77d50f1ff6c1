#!/usr/bin/env bash
# `pip install .` as a user runs it, on a machine without CUDA (docs/python.md, "Install"):
#  1. a virtual environment build/pip/venv-VERSION with PyPI's torch==VERSION (default 2.15.0),
#     numpy and pytest (reused when it imports that torch; pip caches the wheels);
#  2. `pip install .` (build isolation: scikit-build-core in pip's build environment, the
#     extension built against the venv's torch) with CUDA hidden: CUDA_HOME=/nonexistent, no nvcc
#     on PATH; ccache, when present, through CMAKE_CXX_COMPILER_LAUNCHER;
#  3. from another folder: the installed module's dependencies (nothing outside torch, glibc,
#     libstdc++/libgcc and the bundled Highway), one op called by hand, then the package's pytest
#     suite (python/tests) against the installed package, dsv4cpu-verify taken from the release
#     build (ci/test.sh runs this after it; without one, the tests needing it are skipped).
# Usage: ci/pip-install.sh [TORCH_VERSION]. Needs PyPI on first use of a torch version.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh > /dev/null
root="${PWD}"
torch_version="${1:-2.15.0}"
venv="${root}/build/pip/venv-${torch_version}"
python="${venv}/bin/python"
start=${SECONDS}
step="the virtual environment"
venv_seconds=0 install_seconds=0 outside=""
finish() {
  local status=$?
  if [ -n "${outside}" ]; then rm -rf "${outside}"; fi
  echo "ci/pip-install.sh: torch ${torch_version}: venv ${venv_seconds} s, pip install" \
       "${install_seconds} s, total $((SECONDS - start)) s:" \
       "$([ "${status}" = 0 ] && echo ok || echo "FAILED (${step})")"
}
trap finish EXIT

has_torch() {
  "${python}" - "${torch_version}" 2>/dev/null <<'EOF'
import importlib.metadata as m, sys
import pytest, torch  # noqa: F401
sys.exit(m.version("torch").split("+")[0] != sys.argv[1])
EOF
}
if ! has_torch; then
  echo "ci/pip-install.sh: torch==${torch_version}, numpy, pytest in ${venv}"
  rm -rf "${venv}"
  /usr/bin/python3 -m venv "${venv}"
  "${python}" -m pip install --quiet "torch==${torch_version}" numpy pytest
  has_torch
fi
venv_seconds=$((SECONDS - start))

# No CUDA toolkit: the build must not need one.
export CUDA_HOME=/nonexistent
unset CUDA_PATH CUDACXX
path=""
IFS=: read -ra entries <<< "${PATH}"
for entry in "${entries[@]}"; do
  if [ ! -x "${entry}/nvcc" ]; then path="${path:+${path}:}${entry}"; fi
done
export PATH="${path}"
if command -v nvcc > /dev/null; then
  echo "ci/pip-install.sh: nvcc still on PATH" >&2
  exit 1
fi
if command -v ccache > /dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
fi

step="pip install"
install_start=${SECONDS}
"${python}" -m pip install --quiet "${root}"
install_seconds=$((SECONDS - install_start))

step="the installed module"
outside="$(mktemp -d)"
cd "${outside}"
"${python}" - "${venv}" <<'EOF'
import os, subprocess, sys
import torch
import dsv4cpu

package = os.path.dirname(dsv4cpu.__file__)
assert package.startswith(sys.argv[1]), f"dsv4cpu imported from {package}, not the venv"
module = os.path.join(package, "_dsv4cpu_torch.so")
needed = subprocess.run(["readelf", "-d", module], capture_output=True, text=True, check=True)
names = [l.split("[")[1].rstrip("]") for l in needed.stdout.splitlines() if "(NEEDED)" in l]
allowed = ("libtorch", "libc10", "libhwy", "libgomp", "libstdc++", "libgcc_s", "libm.", "libc.",
           "ld-linux")
assert all(n.startswith(allowed) for n in names), f"{module} needs {names}"
assert "$ORIGIN" in needed.stdout, f"{module}: no RUNPATH $ORIGIN"
maps = open("/proc/self/maps").read()
runtimes = {l.split()[-1] for l in maps.splitlines() if "libgomp" in l}
assert len(runtimes) == 1, f"OpenMP runtimes in one process: {sorted(runtimes)}"
highway = {l.split()[-1] for l in maps.splitlines() if "libhwy" in l}
assert highway == {os.path.join(package, "libhwy.so.1")}, f"Highway from {sorted(highway)}"

out = torch.empty(2, 64, dtype=torch.float32)
dsv4cpu.make_cos_sin_cache(2, 10000.0, cos_sin_cache=out)
# compressor.md §8.2: row 0 is cos(0) = 1 then sin(0) = 0; row 1 starts with cos(1 · theta^0).
assert out[0, :32].eq(1).all() and out[0, 32:].eq(0).all(), out[0]
assert abs(out[1, 0].item() - 0.5403023) < 1e-6, out[1, 0]
print(f"dsv4cpu {dsv4cpu.__file__} with torch {torch.__version__}: needs {', '.join(names)}; "
      f"make_cos_sin_cache as by hand")
EOF

# Without a release build, the tests that compare with dsv4cpu-verify are reported as skipped.
verify="${root}/build/release/tools/dsv4cpu-verify"
if [ -z "${DSV4CPU_VERIFY:-}" ] && [ -x "${verify}" ]; then export DSV4CPU_VERIFY="${verify}"; fi
step="the package's tests"
DSV4CPU_FIXTURES="${root}/fixtures" \
  "${python}" -m pytest -q -p no:cacheprovider -rs "${root}/python/tests"
