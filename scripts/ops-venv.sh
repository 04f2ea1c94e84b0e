# Sourced by the scripts that drive brokers from Python (ha-rolling-test.sh,
# deploy-check.sh): sets OPS_PY to the interpreter of a virtualenv holding the
# official client queen-mq 2.6.0 and PyYAML, made on first use in
# target/ops-venv (git-ignored with target/).
OPS_VENV="${OPS_VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/ops-venv}"
if ! "$OPS_VENV/bin/python" -c 'import queen, yaml' >/dev/null 2>&1; then
  py=python3
  command -v python3.11 >/dev/null 2>&1 && py=python3.11
  rm -rf "$OPS_VENV"
  "$py" -m venv "$OPS_VENV"
  "$OPS_VENV/bin/python" -m pip install --disable-pip-version-check --quiet "queen-mq==2.6.0" "PyYAML>=6"
fi
OPS_PY="$OPS_VENV/bin/python"
