#!/usr/bin/env bash
# Compatibility suite: the official Python client `queen-mq` against our broker.
#
#   bash compat/python/run.sh            # every pinned client version
#   bash compat/python/run.sh 2.6.0      # only the versions named
#
# For each client version: a virtualenv of its own (compat/python/.venv-<version>,
# git-ignored), a fresh database, a fresh broker on a free loopback port, then
# pytest on compat/python/scenarios with QUEEN_URL pointing at that broker.
# Exits non-zero when any scenario fails in any version, when PyPI cannot be
# reached to install a client, or when the broker cannot be built or started.
#
# Environment (all optional):
#   PGHOST / PGPORT / PGUSER    PostgreSQL to create the databases on (127.0.0.1 / 5432 / postgres)
#   QUEEN_SERVER_BIN            broker binary to use instead of building target/debug/queen-server
#   QUEEN_COMPAT_PYTHON         interpreter for the virtualenvs (python3.11, else python3)
#   QUEEN_COMPAT_OUT            where broker logs and junit reports go (compat/python/.out)
#   PYTEST_ADDOPTS              extra pytest options (e.g. "-k dlq -x")
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

ALL_VERSIONS=(1.3.0 2.6.0)
PYTEST_PIN="pytest==9.2.0"
if [[ $# -gt 0 ]]; then VERSIONS=("$@"); else VERSIONS=("${ALL_VERSIONS[@]}"); fi

export PGHOST="${PGHOST:-127.0.0.1}"
export PGPORT="${PGPORT:-5432}"
export PGUSER="${PGUSER:-postgres}"
OUT="${QUEEN_COMPAT_OUT:-$HERE/.out}"
mkdir -p "$OUT"

PY="${QUEEN_COMPAT_PYTHON:-}"
if [[ -z "$PY" ]]; then
  if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi

say() { printf '[compat/python] %s\n' "$*"; }
die() { printf '[compat/python] FATAL: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- cleanup
BROKER_PID=""
PYTEST_PID=""
DB_NAME=""
SPOOL_DIR=""
cleanup() {
  local rc=$?
  if [[ -n "$PYTEST_PID" ]]; then
    # The queen client installs its own SIGTERM handler, so pytest may not
    # stop on TERM: give it a moment, then KILL it (by its own pid).
    stop_pid "$PYTEST_PID" 5
    PYTEST_PID=""
  fi
  stop_broker
  drop_db
  [[ -z "$SPOOL_DIR" ]] || rm -rf "$SPOOL_DIR"
  exit "$rc"
}
# stop_pid PID SECONDS: SIGTERM, wait up to SECONDS, then SIGKILL.
stop_pid() {
  local pid="$1" secs="$2"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((secs * 5))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "process $pid did not stop on SIGTERM within ${secs}s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}
stop_broker() {
  if [[ -n "$BROKER_PID" ]]; then
    stop_pid "$BROKER_PID" 10
    BROKER_PID=""
  fi
}
drop_db() {
  if [[ -n "$DB_NAME" ]]; then
    dropdb --if-exists "$DB_NAME" >/dev/null 2>&1 \
      || psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)" >/dev/null 2>&1 \
      || say "could not drop database $DB_NAME"
    DB_NAME=""
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- prerequisites
command -v "$PY" >/dev/null 2>&1 || die "no Python interpreter ($PY)"
command -v psql >/dev/null 2>&1 || die "psql is required"
command -v createdb >/dev/null 2>&1 || die "createdb is required"
pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null \
  || psql -X -q -d postgres -c 'select 1' >/dev/null \
  || die "PostgreSQL is not reachable at $PGHOST:$PGPORT"

# ---------------------------------------------------------------- virtualenvs
setup_venv() {
  local v="$1" venv="$HERE/.venv-$1"
  if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    say "creating virtualenv $venv"
    rm -rf "$venv"
    "$PY" -m venv "$venv" || die "cannot create virtualenv $venv"
  fi
  # 2.x with its zstd extra (the `zstandard` package): push_compression and
  # framed_pop need it (test_binary_push.py); 1.x has no such extra
  local spec="queen-mq==$v"
  [[ "$v" == 1.* ]] || spec="queen-mq[zstd]==$v"
  say "installing $spec and $PYTEST_PIN into $venv"
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --quiet \
        --retries 2 --timeout 30 "$spec" "$PYTEST_PIN"; then
    die "pip could not install $spec / $PYTEST_PIN (is PyPI reachable?). Refusing to skip."
  fi
  local got
  got="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("queen-mq"))')" \
    || die "queen-mq is not importable in $venv"
  [[ "$got" == "$v" ]] || die "$venv has queen-mq $got, expected $v"
}

for v in "${VERSIONS[@]}"; do
  setup_venv "$v"
done

# ---------------------------------------------------------------- broker
BIN="${QUEEN_SERVER_BIN:-}"
if [[ -z "$BIN" ]]; then
  say "building the broker (cargo build -p queen-server)"
  (cd "$ROOT" && cargo build -p queen-server) || die "cargo build -p queen-server failed"
  BIN="$ROOT/target/debug/queen-server"
fi
[[ -x "$BIN" ]] || die "broker binary $BIN is missing"

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start_broker() {
  local v="$1" port="$2" log="$3" spool="$4"
  mkdir -p "$spool"
  PORT="$port" HOST=127.0.0.1 PG_HOST="$PGHOST" PG_PORT="$PGPORT" PG_USER="$PGUSER" \
    PG_DB="$DB_NAME" DB_POOL_SIZE=10 FILE_BUFFER_DIR="$spool" LOG_LEVEL="${LOG_LEVEL:-info}" SHUTDOWN_DRAIN_MS=0 \
    "$BIN" serve >"$log" 2>&1 &
  BROKER_PID=$!
  local url="http://127.0.0.1:$port/health"
  for _ in $(seq 1 300); do
    if ! kill -0 "$BROKER_PID" 2>/dev/null; then
      say "broker exited before it became healthy; its log:"
      tail -n 50 "$log" >&2 || true
      BROKER_PID=""
      return 1
    fi
    if "$PY" - "$url" <<'PYEOF' >/dev/null 2>&1
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
PYEOF
    then
      return 0
    fi
    sleep 0.2
  done
  say "broker did not answer 200 on /health within 60 s; its log:"
  tail -n 50 "$log" >&2 || true
  return 1
}

# ---------------------------------------------------------------- run
declare -A RESULT=()
overall=0

for v in "${VERSIONS[@]}"; do
  tag="${v//./_}"
  DB_NAME="queen_compat_${tag}_$$"
  say "=== queen-mq $v: database $DB_NAME"
  createdb "$DB_NAME" || die "createdb $DB_NAME failed"
  port="$(free_port)"
  log="$OUT/broker-$v.log"
  SPOOL_DIR="$OUT/spool-$v-$$"
  if ! start_broker "$v" "$port" "$log" "$SPOOL_DIR"; then
    RESULT[$v]="BROKER-FAILED"
    overall=1
    drop_db
    rm -rf "$SPOOL_DIR"
    SPOOL_DIR=""
    continue
  fi
  say "broker pid $BROKER_PID on port $port (log: $log)"

  # pytest runs in the background and is waited for, so that a signal to this
  # script is handled at once (and cleans up) instead of after the whole run.
  QUEEN_URL="http://127.0.0.1:$port" QUEEN_COMPAT_BROKER_LOG="$log" \
    "$HERE/.venv-$v/bin/python" -m pytest -v -rfEs \
      --rootdir="$HERE/scenarios" -c "$HERE/scenarios/pytest.ini" \
      --junitxml="$OUT/junit-$v.xml" -o junit_suite_name="queen-mq-$v" "$HERE/scenarios" &
  PYTEST_PID=$!
  rc=0
  wait "$PYTEST_PID" || rc=$?
  PYTEST_PID=""

  stop_broker
  drop_db
  rm -rf "$SPOOL_DIR"
  SPOOL_DIR=""
  if [[ $rc -eq 0 ]]; then
    RESULT[$v]="PASS"
  else
    RESULT[$v]="FAIL (pytest exit $rc)"
    overall=1
  fi
done

say "=== summary"
for v in "${VERSIONS[@]}"; do
  say "queen-mq $v: ${RESULT[$v]:-NOT RUN}"
done
exit "$overall"
