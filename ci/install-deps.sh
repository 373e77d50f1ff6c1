#!/usr/bin/env bash
# Installs every Debian package dsv4cpu needs to build, test, benchmark and generate fixtures
# (python3-venv: the virtual environments of ci/pip-install.sh and ci/peer.sh).
# Idempotent; runs as root on a fresh Debian 12 machine.
set -euo pipefail
packages=(
  cmake g++ make ninja-build pkg-config git patch
  clang-14 libclang-rt-14-dev libomp-14-dev
  libhwy-dev librapidcheck-dev libgtest-dev libgmock-dev libbenchmark-dev
  libeigen3-dev nlohmann-json3-dev libcli11-dev
  python3 python3-numpy python3-venv
  libtorch-dev python3-torch python3-pytest
  chromium
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
