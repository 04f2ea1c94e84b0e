#!/usr/bin/env bash
# The ABBA pairs of docs/benchmarks.md, "Consume path, part 2": per pop+ack
# pgbench transaction, main's functions (database $BASE_DB) against this
# branch's statements (new_bB in $DB) and this branch's functions with their
# generic plans (old_bB in $DB). Cursors rewound before every run.
#   BATCHES="1 100" SECS=12 DB=ex BASE_DB=exbase SCR=/tmp/scr abba.sh
set -u
here=$(dirname "$0")
export PGPORT=${PGPORT:-5499} CLUSTER=${CLUSTER:-i19prof} PGDATA
run() { # db script
  psql -h 127.0.0.1 -p "$PGPORT" -U postgres -d "$1" -qc \
    "UPDATE queen.log_consumers SET committed_offset = 0, lease_expires_at = NULL, last_consumed_at = NULL"
  echo "$1 $(DB=$1 "$here/bench.sh" "$SCR/$2.sql" 16 "${SECS:-12}" 2>/dev/null)"
}
for b in $BATCHES; do
  for v in "$BASE_DB old_b$b" "$DB new_b$b" "$DB old_b$b" "$DB old_b$b" "$DB new_b$b" "$BASE_DB old_b$b"; do
    # shellcheck disable=SC2086
    run $v
  done
done
