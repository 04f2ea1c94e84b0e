#!/usr/bin/env bash
# Three brokers behind HAProxy (deploy/haproxy.cfg), under pushes, long-poll
# pops and acks sent through the official Python client's HTTP layer: every
# broker restarted with SIGTERM, one at a time, twice; then one SIGKILLed.
# Asserts for the SIGTERM rolls: no failed request, no failed attempt, nothing
# lost, nothing delivered after its ack, order per partition; reports the
# SIGKILL phase (scripts/ha_rolling.py; docs/operations/high-availability.md
# has the numbers). About a minute and a half.
#
# Environment: PGHOST/PGUSER (127.0.0.1/postgres), SHUTDOWN_DRAIN_MS (3000:
# HAProxy's inter 1s x fall 2 plus a margin), KEEP_WORK=1 keeps the logs.
set -euo pipefail
cd "$(dirname "$0")/.."

export PGHOST=${PGHOST:-127.0.0.1} PGUSER=${PGUSER:-postgres}
export SHUTDOWN_DRAIN_MS=${SHUTDOWN_DRAIN_MS:-3000}
command -v haproxy >/dev/null || { echo "ha-rolling: haproxy is not installed (apt-get install haproxy)" >&2; exit 1; }
source scripts/ops-venv.sh

cargo build -q -p queen-server
export ROLLING_SERVER_BIN="$PWD/target/debug/queen-server"
export WORK_DIR; WORK_DIR=$(mktemp -d -t queen-rolling.XXXXXX)
export PG_DB="queen_rolling_$$"
psql -h "$PGHOST" -U "$PGUSER" -d postgres -qc "CREATE DATABASE $PG_DB"
cleanup() {
  psql -h "$PGHOST" -U "$PGUSER" -d postgres -qc "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" || true
  [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK_DIR"
}
trap cleanup EXIT

free_ports() {
  "$OPS_PY" - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(",".join(str(s.getsockname()[1]) for s in socks))
PY
}
ports=$(free_ports 7)
IFS=, read -r p0 p1 p2 m0 m1 m2 lb <<<"$ports"
export BROKER_PORTS="$p0,$p1,$p2" MESH_PORTS="$m0,$m1,$m2" LB_PORT="$lb"

if ! "$OPS_PY" scripts/ha_rolling.py; then
  echo "ha-rolling: logs in $WORK_DIR" >&2
  KEEP_WORK=1
  tail -n 30 "$WORK_DIR"/broker-*.log "$WORK_DIR"/haproxy.log >&2 || true
  exit 1
fi
