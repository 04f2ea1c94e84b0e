#!/usr/bin/env bash
# The switch from the reference, end to end with the official client
# (docs/migrating.md; issue 35):
#
#   bash compat/python/import.sh
#
# 1. a reference 0.15 database from the sheet's facts and the fixture's rows
#    (crates/queen-server/tests/integration/reference/*.sql);
# 2. `queen-server import` into a fresh database, then again: the second run
#    must import nothing;
# 3. a broker on the imported database, and import_check.py on the 2.6.0
#    client consumes every group (exactly once, in order, leases delivered
#    again), reads the dead letters and traces, and pushes to the encrypted
#    queue;
# 4. that envelope is opened the reference's way (AES-256-GCM, the first 12
#    IV bytes as nonce) by Python's `cryptography`, an implementation of its own.
#
# Environment: PGHOST / PGPORT / PGUSER (127.0.0.1 / 5432 / postgres),
# QUEEN_SERVER_BIN (else target/debug/queen-server is built), QUEEN_COMPAT_VENV
# (the 2.6.0 client's virtualenv; compat/python/.venv-2.6.0, created as
# run.sh does when missing).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
FIXTURES="$ROOT/crates/queen-server/tests/integration/reference"
KEY=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
VENV="${QUEEN_COMPAT_VENV:-$HERE/.venv-2.6.0}"
OUT="${QUEEN_COMPAT_OUT:-$HERE/.out}"
mkdir -p "$OUT"

say() { printf '[compat/import] %s\n' "$*"; }
die() { printf '[compat/import] FATAL: %s\n' "$*" >&2; exit 1; }

SRC="queen_import_src_$$"
DST="queen_import_dst_$$"
BROKER_PID=""
SPOOL="$OUT/import-spool-$$"
cleanup() {
  local rc=$?
  if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
  fi
  dropdb --if-exists "$SRC" >/dev/null 2>&1 || true
  dropdb --if-exists "$DST" >/dev/null 2>&1 || true
  rm -rf "$SPOOL"
  exit "$rc"
}
trap cleanup EXIT

if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating $VENV"
  python3 -m venv "$VENV" || die "cannot create $VENV"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet --retries 2 --timeout 30 \
    "queen-mq[zstd]==2.6.0" || die "pip could not install queen-mq 2.6.0"
fi
"$VENV/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("queen-mq") != "2.6.0")' \
  || die "$VENV does not hold queen-mq 2.6.0"
python3 -c 'import cryptography' 2>/dev/null || die "python3 needs the cryptography package (to open envelopes the reference's way)"

BIN="${QUEEN_SERVER_BIN:-}"
if [[ -z "$BIN" ]]; then
  (cd "$ROOT" && cargo build -q -p queen-server) || die "cargo build -p queen-server failed"
  BIN="$ROOT/target/debug/queen-server"
fi

createdb "$SRC" && createdb "$DST"
psql -X -q -v ON_ERROR_STOP=1 -d "$SRC" -f "$FIXTURES/schema.sql" -f "$FIXTURES/fill.sql" >/dev/null
export PG_HOST="$PGHOST" PG_PORT="$PGPORT" PG_USER="$PGUSER" PG_DB="$DST" QUEEN_ENCRYPTION_KEY="$KEY" LOG_LEVEL=warn
FROM="postgres://$PGUSER@$PGHOST:$PGPORT/$SRC"

"$BIN" import --from "$FROM" --dry-run >"$OUT/import-dry-run.txt"
"$BIN" import --from "$FROM" --json >"$OUT/import-1.json"
"$BIN" import --from "$FROM" --json >"$OUT/import-2.json"
python3 - "$OUT/import-1.json" "$OUT/import-2.json" <<'PYEOF'
import json, sys
first, second = (json.load(open(p)) for p in sys.argv[1:3])
assert first["totals"]["imported"] == 14 and first["totals"]["mismatches"] == 0, first["totals"]
assert first["totals"]["leasedRedelivered"] == 2, first["totals"]
assert second["totals"]["imported"] == 0 and second["totals"]["mismatches"] == 0, second["totals"]
PYEOF
say "imported 14 messages; the second run imported none"

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
mkdir -p "$SPOOL"
PORT="$PORT" HOST=127.0.0.1 FILE_BUFFER_DIR="$SPOOL" SHUTDOWN_DRAIN_MS=0 "$BIN" serve >"$OUT/import-broker.log" 2>&1 &
BROKER_PID=$!
for _ in $(seq 1 150); do
  curl -fs "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  kill -0 "$BROKER_PID" 2>/dev/null || die "the broker exited: $(tail -5 "$OUT/import-broker.log")"
  sleep 0.2
done
QUEEN_URL="http://127.0.0.1:$PORT" "$VENV/bin/python" "$HERE/import_check.py"

# the envelope this broker wrote, opened the reference's way
STORED="$(psql -X -At -d "$DST" -c "SELECT s.payloads[1] FROM queen.segments s WHERE s.transaction_ids[1] = 'ours-1'")"
python3 - "$KEY" "$STORED" <<'PYEOF'
import base64, json, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
key, env = bytes.fromhex(sys.argv[1]), json.loads(sys.argv[2])
iv = base64.b64decode(env["iv"])
assert len(iv) == 16, iv
plain = AESGCM(key).decrypt(iv[:12], base64.b64decode(env["encrypted"]) + base64.b64decode(env["authTag"]), None)
assert json.loads(plain) == {"from": "queen-rs"}, plain
PYEOF
say "an envelope written here opens the reference's way; passed"
