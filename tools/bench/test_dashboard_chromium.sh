#!/usr/bin/env bash
# Renders a dashboard in headless Chromium: the page must finish its script (data-rendered set to the
# number of charts) and log nothing to the console (no errors, no warnings).
# Usage: test_dashboard_chromium.sh RESULT.json|FOLDER ... (a folder stands for its *.json files)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
chromium_bin="$(command -v chromium || true)"
if [ -z "${chromium_bin}" ]; then
  echo "chromium is not installed (ci/install-deps.sh installs it)" >&2
  exit 1
fi
files=()
for arg in "$@"; do
  if [ -d "${arg}" ]; then files+=("${arg}"/*.json); else files+=("${arg}"); fi
done
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
python3 "${here}/dsv4cpu-dashboard" "${files[@]}" -o "${work}/report.html"
"${chromium_bin}" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="${work}/profile" --enable-logging=stderr --v=0 \
  --virtual-time-budget=2000 --dump-dom "file://${work}/report.html" \
  > "${work}/dom.html" 2> "${work}/log.txt" || { cat "${work}/log.txt" >&2; exit 1; }
if grep -q 'CONSOLE' "${work}/log.txt"; then
  echo "console messages:" >&2
  grep 'CONSOLE' "${work}/log.txt" >&2
  exit 1
fi
charts=$(grep -o 'data-rendered="[0-9]*"' "${work}/dom.html" | grep -o '[0-9]*' || true)
if [ -z "${charts}" ] || [ "${charts}" -lt 1 ]; then
  echo "the page did not render its charts (data-rendered='${charts}')" >&2
  exit 1
fi
echo "dashboard rendered ${charts} charts with no console messages"
