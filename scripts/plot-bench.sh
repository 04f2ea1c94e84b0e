#!/usr/bin/env bash
# Plots the end-to-end runs of a queen-bench suite report:
#   scripts/plot-bench.sh [bench-results/latest.json] [docs/bench-e2e.png]
# matplotlib lives in its own venv under bench-results/.venv (created on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=bench-results/.venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  mkdir -p bench-results
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q matplotlib
fi
exec "$venv/bin/python" scripts/plot-bench.py "$@"
