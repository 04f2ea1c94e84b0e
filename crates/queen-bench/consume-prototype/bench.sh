#!/usr/bin/env bash
# One pgbench run against the private server (port $PGPORT, database $DB) and
# the server's CPU per pgbench transaction, from /proc (pgcpu.sh):
#   bench.sh SCRIPT CLIENTS SECONDS
# PGOPTIONS passes through (e.g. "-c plan_cache_mode=force_generic_plan").
set -euo pipefail
here=$(dirname "$0")
s=$1 c=$2 t=$3
tck=$(getconf CLK_TCK)
a=$("$here/pgcpu.sh")
out=$(pgbench -h 127.0.0.1 -p "$PGPORT" -U postgres -n -M prepared -c "$c" -j 2 -T "$t" -f "$s" "$DB" 2>&1)
b=$("$here/pgcpu.sh")
n=$(echo "$out" | awk '/number of transactions actually processed/ {print $NF}' | cut -d/ -f1)
tps=$(echo "$out" | awk '/^tps/ {print $3}')
fail=$(echo "$out" | grep -E "aborted|error" | head -2 | tr '\n' ' ' || true)
echo "$(basename "$s") c=$c n=$n tps=$tps pg_cpu_us_per_txn=$(( (b - a) * 1000000 / tck / (n > 0 ? n : 1) )) $fail"
