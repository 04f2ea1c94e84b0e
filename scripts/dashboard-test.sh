#!/usr/bin/env bash
# Browser test of the dashboard: starts one broker on its own database, its
# link to PostgreSQL through a fault proxy (queen-testkit's `fault-proxy`, so
# the test can cut the database), then drives the dashboard in Debian's
# chromium with playwright-core (dashboard/test/browser.mjs). Installs chromium (apt) and playwright-core
# (npm, into the git-ignored dashboard/test/node_modules) when missing.
# Screenshots land in dashboard/test/screenshots/; with --update-docs the
# overview is also written to docs/dashboard.png.
set -euo pipefail
cd "$(dirname "$0")/.."

docs_png=""
[ "${1:-}" = "--update-docs" ] && docs_png="$PWD/docs/dashboard.png"
PGHOST=${PGHOST:-127.0.0.1}
PGUSER=${PGUSER:-postgres}
port=${DASHBOARD_TEST_PORT:-26700}

if [ ! -x /usr/bin/chromium ]; then
  echo "dashboard-test: installing chromium"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if [ ! -d dashboard/test/node_modules/playwright-core ]; then
  (cd dashboard/test && npm ci --no-audit --no-fund --loglevel=error)
fi

cargo build -q -p queen-server -p queen-testkit --bin queen-server --bin fault-proxy
db="queen_dash_$$"
psql -h "$PGHOST" -U "$PGUSER" -d postgres -qc "CREATE DATABASE $db"
work=$(mktemp -d)
broker_pid=""
proxy_pid=""
cleanup() {
  [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null || true
  [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null || true
  psql -h "$PGHOST" -U "$PGUSER" -d postgres -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
  rm -rf "$work"
}
trap cleanup EXIT

# the broker reaches PostgreSQL through the proxy; the browser test cuts it
target/debug/fault-proxy "$PGHOST:${PGPORT:-5432}" >"$work/proxy.out" 2>"$work/proxy.log" &
proxy_pid=$!
for _ in $(seq 1 50); do
  [ -s "$work/proxy.out" ] && break
  sleep 0.1
done
read -r _ proxy_addr _ control_addr <"$work/proxy.out" || { cat "$work/proxy.log"; exit 1; }

QUEEN_SERVER_ID=dash-broker PORT=$port HOST=127.0.0.1 PG_HOST="${proxy_addr%:*}" PG_PORT="${proxy_addr##*:}" \
  PG_USER="$PGUSER" PG_DB="$db" \
  FILE_BUFFER_DIR="$work/spool" STATS_INTERVAL_MS=1000 LOG_LEVEL=warn SHUTDOWN_DRAIN_MS=0 \
  target/debug/queen-server serve >"$work/broker.log" 2>&1 &
broker_pid=$!
for _ in $(seq 1 60); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { cat "$work/broker.log"; exit 1; }

status=0
BASE="http://127.0.0.1:$port" PROXY="http://$control_addr" SHOTS="$PWD/dashboard/test/screenshots" DOCS_PNG="$docs_png" \
  timeout 300 node dashboard/test/browser.mjs || status=$?
[ "$status" = 0 ] || { tail -n 50 "$work/broker.log"; cat "$work/proxy.log"; }
exit "$status"
