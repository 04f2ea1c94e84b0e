#!/usr/bin/env bash
# Benchmarks through the official Python client (queen-mq 2.6.0), unchanged,
# reported as msg/s and broker + PostgreSQL CPU per message. Not part of any
# test run.
#
#   QUEEN_SERVER_BIN=/path/to/release/queen-server bash compat/python/bench.sh streams
#   QUEEN_SERVER_BIN=/path/to/release/queen-server bash compat/python/bench.sh consume
#
# streams: a tumbling-window count over a 100 000-message backlog through the
#          streaming SDK (bench_streams.py; BENCH_MESSAGES, BENCH_PARTITIONS 4)
# consume: the default consume() (pop autopilot) against .batch(100), each
#          draining its own 20 000-message backlog over 16 partitions, A B A B
#          (bench_consume.py; BENCH_MESSAGES, BENCH_PARTITIONS 16)
#
# A virtualenv of its own (compat/python/.venv-2.6.0, shared with run.sh), a
# fresh database, one broker on a free loopback port (DB_POOL_SIZE=10, the
# compat suite's settings), then bench_<name>.py. Without QUEEN_SERVER_BIN
# it builds and uses a release broker (cargo build --release -p queen-server).
#
# Environment (all optional): PGHOST / PGPORT / PGUSER (127.0.0.1 / 5432 /
# postgres), QUEEN_COMPAT_PYTHON (python3.11, else python3).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME="${1:-}"
[[ -f "$HERE/bench_$NAME.py" ]] || { echo "usage: bench.sh streams|consume" >&2; exit 2; }
ROOT="$(cd "$HERE/../.." && pwd)"
V=2.6.0
export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
PY="${QUEEN_COMPAT_PYTHON:-}"
if [[ -z "$PY" ]]; then
  if command -v python3.11 >/dev/null 2>&1; then PY=python3.11; else PY=python3; fi
fi
say() { printf '[bench-%s] %s\n' "$NAME" "$*"; }
die() { printf '[bench-%s] FATAL: %s\n' "$NAME" "$*" >&2; exit 1; }

BROKER_PID="" DB_NAME="" WORK=""
cleanup() {
  local rc=$?
  if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
  fi
  if [[ -n "$DB_NAME" ]]; then
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)" >/dev/null 2>&1 \
      || say "could not drop database $DB_NAME"
  fi
  [[ -z "$WORK" ]] || rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

venv="$HERE/.venv-$V"
if [[ ! -x "$venv/bin/python" ]]; then
  "$PY" -m venv "$venv" || die "cannot create virtualenv $venv"
fi
"$venv/bin/python" -m pip install --disable-pip-version-check --quiet "queen-mq[zstd]==$V" \
  || die "pip could not install queen-mq==$V"

BIN="${QUEEN_SERVER_BIN:-}"
if [[ -z "$BIN" ]]; then
  say "building a release broker (cargo build --release -p queen-server)"
  (cd "$ROOT" && cargo build --release -p queen-server) || die "build failed"
  BIN="$ROOT/target/release/queen-server"
fi
[[ -x "$BIN" ]] || die "broker binary $BIN is missing"

DB_NAME="queen_bench_${NAME}_$$"
createdb "$DB_NAME" || die "createdb $DB_NAME failed"
WORK="$(mktemp -d)"
port="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
PORT="$port" HOST=127.0.0.1 PG_HOST="$PGHOST" PG_PORT="$PGPORT" PG_USER="$PGUSER" \
  PG_DB="$DB_NAME" DB_POOL_SIZE=10 FILE_BUFFER_DIR="$WORK/spool" LOG_LEVEL=warn \
  "$BIN" serve >"$WORK/broker.log" 2>&1 &
BROKER_PID=$!
for _ in $(seq 1 300); do
  kill -0 "$BROKER_PID" 2>/dev/null || { tail -n 30 "$WORK/broker.log" >&2; die "broker exited"; }
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  sleep 0.2
done
say "broker $BIN (pid $BROKER_PID) on port $port, database $DB_NAME"
QUEEN_URL="http://127.0.0.1:$port" BENCH_BROKER_PID="$BROKER_PID" BENCH_DB="$DB_NAME" \
  "$venv/bin/python" "$HERE/bench_$NAME.py"
