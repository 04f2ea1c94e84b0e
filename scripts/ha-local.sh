#!/usr/bin/env bash
# Starts three meshed Queen brokers on loopback against one PostgreSQL database
# and asserts through /api/v1/system/shared-state that the mesh is up.
#
#   scripts/ha-local.sh            # start the trio and keep it running (Ctrl-C stops it)
#   scripts/ha-local.sh --check    # start, assert the mesh is up, stop, exit 0/1
#
# Environment: PG_DB (default: a fresh database queen_ha_<pid>, dropped on exit),
# PGHOST/PGUSER (default 127.0.0.1/postgres), QUEEN_SYNC_SECRET (default a random one),
# HTTP ports 6632..6634 and mesh ports 6642..6644 unless BASE_PORT/BASE_MESH_PORT are set.
# QUEEN_MESH_AUTH=strict runs the trio in strict mode (the peer entries carry their server ids).
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
[ "${1:-}" = "--check" ] && check=true
PGHOST=${PGHOST:-127.0.0.1}
PGUSER=${PGUSER:-postgres}
base_port=${BASE_PORT:-6632}
base_mesh=${BASE_MESH_PORT:-6642}
secret=${QUEEN_SYNC_SECRET:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
own_db=false
if [ -z "${PG_DB:-}" ]; then
  PG_DB="queen_ha_$$"
  own_db=true
  psql -h "$PGHOST" -U "$PGUSER" -d postgres -qc "CREATE DATABASE $PG_DB"
fi

cargo build -q -p queen-server
logdir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if $own_db; then
    psql -h "$PGHOST" -U "$PGUSER" -d postgres -qc "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" || true
  fi
}
trap cleanup EXIT

for i in 0 1 2; do
  peers=""
  for j in 0 1 2; do
    [ "$i" = "$j" ] && continue
    peers="${peers:+$peers,}broker-$j@127.0.0.1:$((base_mesh + j))"
  done
  QUEEN_SERVER_ID="broker-$i" PORT=$((base_port + i)) HOST=127.0.0.1 \
    QUEEN_MESH_PORT=$((base_mesh + i)) QUEEN_MESH_PEERS="$peers" QUEEN_SYNC_SECRET="$secret" \
    FILE_BUFFER_DIR="$logdir/spool-$i" PG_HOST="$PGHOST" PG_USER="$PGUSER" PG_DB="$PG_DB" \
    DB_POOL_SIZE=${DB_POOL_SIZE:-10} LOG_LEVEL=${LOG_LEVEL:-info} SHUTDOWN_DRAIN_MS=${SHUTDOWN_DRAIN_MS:-0} \
    target/debug/queen-server serve >"$logdir/broker-$i.log" 2>&1 &
  pids+=($!)
done

mesh_up() {
  for i in 0 1 2; do
    state=$(curl -sf "http://127.0.0.1:$((base_port + i))/api/v1/system/shared-state") || return 1
    python3 -c 'import json,sys; s=json.loads(sys.argv[1]); sys.exit(0 if s.get("enabled") and s.get("peersConnected")==2 else 1)' "$state" || return 1
  done
}

for _ in $(seq 1 100); do
  mesh_up && break
  sleep 0.2
done
if ! mesh_up; then
  echo "ha-local: the mesh did not come up; logs in $logdir" >&2
  tail -n 20 "$logdir"/broker-*.log >&2
  exit 1
fi
echo "ha-local: 3 brokers up on http://127.0.0.1:$base_port..$((base_port + 2)), mesh connected (auth: hmac)"
for i in 0 1 2; do
  curl -s "http://127.0.0.1:$((base_port + i))/api/v1/system/shared-state"; echo
done
if $check; then
  exit 0
fi
echo "ha-local: logs in $logdir; Ctrl-C stops the brokers"
wait
