#!/usr/bin/env bash
# Checks that the load generator works end to end: every scenario of
# `queen-bench suite` (plain-SQL baselines, push, pop+ack, end-to-end, fan-out,
# long-poll wake on one broker and through a two-broker mesh) at a tiny size,
# each on a broker the tool starts on a fresh database (end to end also with
# partitions made by the load and pushes without transactionIds). Prints numbers but
# asserts only that every scenario completed: no wall-clock assertions.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=${PGHOST:-127.0.0.1}
PGUSER=${PGUSER:-postgres}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

cargo build -q -p queen-server -p queen-bench

target/debug/queen-bench suite --broker-bin target/debug/queen-server --pool-size 8 \
  --pg-host "$PGHOST" --pg-user "$PGUSER" \
  --sql-cases rows/b100/c4/p8/m2000,commit/c8/p8/m400,segment/b100/c4/p8/m2000 \
  --push-cases b100/n4/p8/m2000,b1/n8/p8/m200 \
  --pop-ack-cases b100/c4/p8/m2000 \
  --e2e-cases b100/n4/c4/p8/rmax/m3000,b100/n4/c4/p8/r50%/m1000,b100/n4/c4/p8/pnew/anon/rmax/m2000 \
  --fanout-cases b100/n4/g2/c2/p8/m2000 \
  --wake-samples 10 --seconds 30 --drain-seconds 30 --pg-settle-ms 1500 \
  --out-dir "$out"
test -s "$out/latest.json"
echo "bench smoke: ok"
