#!/usr/bin/env bash
# The Python conformance command: installs the Debian packages, builds the PyTorch extension and
# the dsv4cpu package (preset python, Release) and runs `python3 -m dsv4cpu.conformance ARGS` with
# the built package on PYTHONPATH, by default over the embedded fixtures with every available
# variant. Other arguments: a fixture folder, --impl reference, --target MODULE, --report ...
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/install-deps.sh > /dev/null

cmake --preset python > /dev/null
cmake --build --preset python -j "${JOBS:-$(nproc)}" --target dsv4cpu_python > /dev/null
python=$(sed -n 's/^DSV4CPU_PYTHON:[A-Z]*=//p' build/python/CMakeCache.txt)
if [ -z "${python}" ]; then
  echo "ci/python-conformance.sh: no Python that imports torch was found" >&2
  exit 1
fi
if [ "$#" -eq 0 ]; then set -- --impl all fixtures; fi
export PYTHONPATH="${PWD}/build/python/python${PYTHONPATH:+:${PYTHONPATH}}"
exec "${python}" -m dsv4cpu.conformance "$@"
