#!/usr/bin/env bash
# The conformance command: installs the Debian packages, builds dsv4cpu-verify (Release) and runs it
# over the embedded fixtures in fixtures/ with every available variant (Highway variants on every
# compiled target). Extra arguments are passed
# to dsv4cpu-verify (e.g. another fixture folder, or --impl reference).
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/install-deps.sh > /dev/null

cmake --preset release > /dev/null
cmake --build --preset release -j "$(nproc)" --target dsv4cpu-verify > /dev/null
if [ "$#" -eq 0 ]; then set -- --impl all fixtures; fi
exec build/release/tools/dsv4cpu-verify "$@"
