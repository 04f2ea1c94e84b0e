#!/usr/bin/env bash
# Checks that the load generator works end to end: a tiny push/pop run against
# a broker on a fresh database. Prints numbers but asserts only completion.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=${PGHOST:-127.0.0.1}
PGUSER=${PGUSER:-postgres}
db="queen_bench_smoke_$$"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp)

cargo build -q -p queen-server -p queen-bench
psql -h "$PGHOST" -U "$PGUSER" -qc "CREATE DATABASE $db" postgres

broker_pid=""
cleanup() {
  [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
  psql -h "$PGHOST" -U "$PGUSER" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" postgres || true
  rm -f "$log"
}
trap cleanup EXIT

PORT=$port HOST=127.0.0.1 PG_HOST=$PGHOST PG_USER=$PGUSER PG_DB=$db DB_POOL_SIZE=10 LOG_LEVEL=warn \
  target/debug/queen-server serve >"$log" 2>&1 &
broker_pid=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { cat "$log"; echo "bench smoke: broker did not start"; exit 1; }

target/debug/queen-bench push-pop --url "http://127.0.0.1:$port" --messages 2000 --batch 100 \
  --producers 4 --consumers 4 --partitions 8 --payload-bytes 256 --seconds 60
echo "bench smoke: ok"
